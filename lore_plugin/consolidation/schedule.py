"""When consolidation runs, and what its report says: the cheap overdue check (one meta
read, so SessionStart can ask it), running the cycle under the consolidation lock, refreshing
the servers' vector snapshot afterwards, and a report as readable lines.

The cycle itself is in cycle.py (its seven phases) and llm_phases.py (phases 3-4)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.config import Settings
from ..core.errors import LLMUnavailable, LoreError
from ..core.locks import consolidation_lock
from ..store import Store
from .cycle import Clock, consolidate

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder
    from ..llm.client import LLM

log = logging.getLogger(__name__)


def last_consolidated(settings: Settings) -> float | None:
    """When the last real run finished; None if never (or the database cannot say)."""
    try:
        store = Store(settings.db_path, readonly=True)
    except LoreError:
        return None  # needs a migration (or is damaged): a run opens it writable and says so
    try:
        last = store.get_meta("last_consolidation")
    finally:
        store.close()
    try:
        return float(last) if last is not None else None
    except ValueError:
        return None


def is_overdue(settings: Settings, clock: Clock) -> bool:
    """Cheap: one read of meta.last_consolidation. No database yet means nothing to do."""
    if not settings.db_path.exists():
        return False
    previous = last_consolidated(settings)
    if previous is None:
        return True
    elapsed = clock() - previous
    return elapsed >= settings.consolidation_interval_secs or elapsed < 0  # or the clock went back


def default_llm(settings: Settings) -> LLM:
    from ..llm.client import pick_llm

    return pick_llm(settings)


def default_embedder(settings: Settings) -> Embedder:
    from ..embedding.embedder import LocalEmbedder

    return LocalEmbedder(settings.home / "models", threads=None)  # loads the model only if phase 3 needs it


def run_if_overdue(settings: Settings, clock: Clock, force: bool = False,
                   make_llm: Callable[[Settings], LLM] = default_llm,
                   make_embedder: Callable[[Settings], Embedder | None] = default_embedder,
                   ) -> dict[str, Any] | None:
    """Consolidates when overdue (or forced) under the consolidation lock. Returns None when
    not overdue or when another process holds the lock: two sessions starting at once never
    run two consolidations, and the OS frees the lock of a holder that died."""
    if not force and not is_overdue(settings, clock):
        return None
    lock = consolidation_lock(settings.lock_dir)
    if not lock.try_acquire():
        log.info("consolidation already running elsewhere")
        return None
    try:
        if not force and not is_overdue(settings, clock):  # someone finished just before us
            return None
        llm: LLM | None = None
        llm_missing = None
        try:
            llm = make_llm(settings)
        except LLMUnavailable as exc:
            llm_missing = f"no LLM ({exc})"
        store = Store(settings.db_path)
        try:
            report = consolidate(settings, store, clock, llm, make_embedder(settings),
                                 llm_missing=llm_missing)
        finally:
            store.close()
        log.info("consolidation done in %.2fs: %s", report["duration_s"], summary_line(report))
        _refresh_vector_snapshot(settings)
        return report
    finally:
        lock.release()


def _refresh_vector_snapshot(settings: Settings) -> None:
    """Consolidation changes vectors (merges, supersessions, forgetting), which invalidates
    the servers' snapshot; rewriting it here, in the background, spares the next server the
    slow load."""
    from ..recall.search import refresh_snapshot

    try:
        started = time.perf_counter()
        if refresh_snapshot(settings.db_path):
            log.info("vector snapshot rewritten in %.2fs", time.perf_counter() - started)
    except Exception as exc:  # only a cache
        log.warning("could not rewrite the vector snapshot: %s", exc)


# -- reading a report -------------------------------------------------------------------------
COUNTS = (("relevance_updated", "relevance"), ("topics_merged", "merged"),
          ("topic_links", "topic links"), ("concept_links", "concept links"),
          ("renamed", "headings renamed"), ("resummarised", "re-summarised"),
          ("contradictions", "superseded"), ("cued", "given cues"),
          ("edges_pruned", "edges pruned"),
          ("forgotten", "forgotten"), ("patterns", "recurring failures"))


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
    reembedded = p.get("reembed", {}).get("fragments")
    add("merge", f"{m['merged']} of {m['topics']} topics {verb('would merge', 'merged')}, "
        f"{m['children_moved']} children {verb('would move', 'moved')}"
        + (f" (re-embedded under their new topic: {reembedded})" if reembedded else ""),
        m["items"])
    for key, title in (("topic_links", "topic links"), ("concept_links", "concept links")):
        add(title, f"{p[key]['new']} new, {p[key]['kept']} kept", p[key]["items"])
    for key, title, noun, done in (
            ("heading_names", "heading names", "headings due", "renamed"),
            ("resummarise", "re-summarise", "topics due", "re-summarised"),
            ("contradictions", "contradictions", "sibling groups due", "superseded"),
            ("cues", "cues", "notes due", "given cues")):
        if key not in p:  # reports recorded before heading names (or cues) have none
            continue
        e = p[key]
        if key in skipped:
            add(title, f"skipped: {skipped[key]}", e["items"])
        else:
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
