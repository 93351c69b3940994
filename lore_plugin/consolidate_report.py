"""Reading a consolidation report: the one-line summary the log gets and the phase-by-phase
lines `lore consolidate` prints."""

from __future__ import annotations

from typing import Any

COUNTS = (("relevance_updated", "relevance"), ("topics_merged", "merged"),
          ("topic_links", "topic links"), ("concept_links", "concept links"),
          ("resummarised", "re-summarised"), ("contradictions", "superseded"),
          ("edges_pruned", "edges pruned"), ("forgotten", "forgotten"),
          ("patterns", "recurring failures"))


def summary_line(report: dict[str, Any]) -> str:
    return ", ".join(f"{label} {report.get(key, 0)}" for key, label in COUNTS)


def describe(report: dict[str, Any]) -> list[str]:
    """Readable lines, phase by phase, for `lore consolidate`."""
    dry = bool(report.get("dry_run"))

    def verb(would: str, did: str) -> str:
        return would if dry else did

    p, skipped = report["phases"], report.get("skipped", {})
    title = "dry run (nothing changed)" if dry else "consolidated"
    lines = [f"{title} in {report.get('duration_s', 0):.2f}s"]

    def add(title: str, text: str, items: list[str] | None = None) -> None:
        lines.append(f"  {title:<15} {text}")
        lines.extend(f"  {'':<15}   - {item}" for item in (items or [])[:20])
        if items and len(items) > 20:
            lines.append(f"  {'':<15}   … and {len(items) - 20} more")

    r = p["relevance"]
    add("relevance", f"{r['fragments']} fragments, {r['changed']} "
        f"{verb('would change', 'changed')}")
    m = p["merge"]
    add("merge", f"{m['merged']} of {m['topics']} topics {verb('would merge', 'merged')}, "
        f"{m['children_moved']} children {verb('would move', 'moved')}", m["items"])
    for key, title in (("topic_links", "topic links"), ("concept_links", "concept links")):
        add(title, f"{p[key]['new']} new, {p[key]['kept']} kept", p[key]["items"])
    for key, title, noun in (("resummarise", "re-summarise", "topics due"),
                             ("contradictions", "contradictions", "sibling groups due")):
        e = p[key]
        if key in skipped:
            add(title, f"skipped: {skipped[key]}", e["items"])
        else:
            done = "re-summarised" if key == "resummarise" else "superseded"
            extra = f"; stopped: {e['stopped']}" if e.get("stopped") else ""
            add(title, f"{e['done']} {done} in {e['calls']} LLM calls, {e['due']} {noun}"
                f"{extra}", e["items"])
    d = p["decay"]
    add("decay", f"{d['decayed']} associative edges {verb('would weaken', 'weakened')}, "
        f"{d['pruned']} {verb('would be pruned', 'pruned')}", d["items"])
    f = p["forget"]
    add("forget", f"{f['forgotten']} fragments {verb('would be forgotten', 'forgotten')}",
        f["items"])
    if "patterns" in p:  # reports recorded before issue 17 have none
        add("patterns", f"{p['patterns']['patterns']} recurring failures", p["patterns"]["items"])
    return lines
