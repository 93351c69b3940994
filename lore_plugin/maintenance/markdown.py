"""`lore export --markdown DIR`: a read-only Markdown mirror of memory, one file per topic,
laid out for Obsidian: YAML front matter with ids and dates, a heading per concept, facts as
bullets (details nested under them), and wiki-links for associations.

Every file says at the top that it is a view: Lore never reads it back, so an edit there
changes nothing. Files are owner-only and their text is redacted. A topic forgotten since the
last export loses its file too: the mirror must not keep what memory let go.

Memory's text is data, never markup: Obsidian and other viewers render inline HTML, so a
remembered `<script>` or `<img onerror=...>` is written escaped (shown, not run)."""

from __future__ import annotations

import html
import json
import os
import re
import time
from collections import defaultdict
from pathlib import Path

from ..core.config import Settings
from ..core.locks import temp_sibling
from ..core.private import create_private, private_dir
from ..core.types import Fragment
from ..recall.render import source_label
from ..safety.redact import redact
from ..store import Store

MARK = 'lore-export: "read-only view"'  # the line that says a file is ours to replace or remove
_UNSAFE = re.compile(r"[^\w\- ]+")


def file_stem(topic: Fragment) -> str:
    """A readable, unique file name: the topic's name without characters Obsidian links or
    file systems trip on, and the start of its id."""
    name = _UNSAFE.sub("", redact(topic.summary)).strip().replace(" ", "-")[:60].strip("-")
    return f"{name or 'topic'}-{topic.id[:8]}"


def heading(text: str) -> str:
    """A heading's text, safe to link to with [[file#heading]]: no characters that end a link,
    and no `<` or `>` (a link cannot hold an escape, so they go rather than make a tag)."""
    return re.sub(r"[#\[\]|^<>\n]+", " ", redact(text)).strip()[:120] or "untitled"


def _when(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def _body(text: str, indent: str) -> str:
    lines = html.escape(redact(text), quote=False).strip().splitlines() or [""]
    return lines[0] + "".join(f"\n{indent}{line}" for line in lines[1:])


class _Mirror:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.topics = [t for t in store.get_many(store.topic_ids(), with_parent=False).values()]
        self.topics.sort(key=lambda t: -t.relevance_score)
        self.home: dict[str, tuple[str, str]] = {}  # fragment → (file stem, heading)
        self.trees: dict[str, dict[str, list[Fragment]]] = {}
        for topic in self.topics:
            stem = file_stem(topic)
            below = store.get_many([i for i, _ in store.descendant_ids(topic.id)])
            kids: dict[str, list[Fragment]] = defaultdict(list)
            for frag in below.values():
                kids[frag.parent_id or ""].append(frag)
            for group in kids.values():
                group.sort(key=lambda f: (f.created_at, f.id))
            self.trees[topic.id] = kids
            self.home[topic.id] = (stem, "")
            for frag in below.values():
                concept = frag if frag.depth == 1 else None
                climb, seen = frag, {frag.id}
                while concept is None and climb.parent_id in below and climb.parent_id not in seen:
                    climb = below[climb.parent_id]
                    seen.add(climb.id)  # a loop in a damaged tree ends the climb
                    concept = climb if climb.depth == 1 else None
                self.home[frag.id] = (stem, heading(concept.summary) if concept else "")
        self.links: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for edge in store.edges_by_kind("associative"):
            self.links[edge.source].append((edge.target, edge.weight))
            self.links[edge.target].append((edge.source, edge.weight))

    def link(self, fid: str) -> str | None:
        if fid not in self.home:
            return None
        stem, head = self.home[fid]
        return f"[[{stem}#{head}]]" if head else f"[[{stem}]]"

    def related(self, fids: list[str], stem: str) -> list[str]:
        seen: dict[str, float] = {}
        for fid in fids:
            for other, weight in self.links.get(fid, []):
                target = self.link(other)
                if target and target != f"[[{stem}]]":
                    seen[target] = max(seen.get(target, 0.0), weight)
        return [t for t, _ in sorted(seen.items(), key=lambda x: -x[1])]

    def render(self, topic: Fragment, exported: float) -> str:
        stem, kids = self.home[topic.id][0], self.trees[topic.id]
        everything = [topic, *(f for group in kids.values() for f in group)]
        front = {"id": topic.id, "title": redact(topic.summary), "created": _when(topic.created_at),
                 "updated": _when(max(f.created_at for f in everything)),
                 "exported": _when(exported), "source": source_label(topic),
                 "fragments": len(everything) - 1, "tags": ["lore"]}
        lines = ["---", *(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in front.items()),
                 MARK, "---", "",
                 f"> [!note] Read-only view of Lore's memory, exported {_when(exported)}. "
                 "Lore never reads this file back: change memory with `lore ui` or the `lore` "
                 "command, then export again.", "", f"# {heading(topic.summary)}", ""]
        if topic.content.strip() and topic.content.strip() != topic.summary.strip():
            lines += [_body(topic.content, ""), ""]
        for concept in kids.get(topic.id, []):
            lines += [f"## {heading(concept.summary)}", "",
                      f"<small>id {concept.id} · {_when(concept.created_at)} · "
                      f"{source_label(concept)}</small>", ""]
            if concept.content.strip() and concept.content.strip() != concept.summary.strip():
                lines += [_body(concept.content, ""), ""]
            self._bullets(concept.id, kids, "", lines, {topic.id, concept.id})
            related = self.related([concept.id], stem)
            if related:
                lines += ["", "Related: " + ", ".join(related)]
            lines.append("")
        related = self.related([topic.id], stem)
        if related:
            lines += ["## Related topics", "", *(f"- {r}" for r in related), ""]
        return "\n".join(lines).rstrip() + "\n"

    def _bullets(self, parent: str, kids: dict[str, list[Fragment]], indent: str,
                 lines: list[str], shown: set[str]) -> None:
        """Each fragment once, however the edges loop (`shown` holds what is written), and no
        deeper than 16 levels, twice what memory holds."""
        if len(indent) > 30:
            return
        for frag in kids.get(parent, []):
            if frag.id in shown:
                continue
            shown.add(frag.id)
            text = f"**{_body(frag.summary, indent + '  ')}**"
            if frag.content.strip() and frag.content.strip() != frag.summary.strip():
                text += f" — {_body(frag.content, indent + '  ')}"
            lines.append(f"{indent}- {text} <small>({frag.id[:12]}, {_when(frag.created_at)}"
                         f", {source_label(frag)})</small>")
            self._bullets(frag.id, kids, indent + "  ", lines, shown)


def export_markdown(settings: Settings, out: Path, now: float | None = None) -> int:
    """Writes the mirror into `out` (created owner-only); returns how many files."""
    private_dir(out)
    exported = time.time() if now is None else now
    store = Store(settings.db_path, readonly=True)
    try:
        with store.read():
            mirror = _Mirror(store)
            written: set[str] = set()
            for topic in mirror.topics:
                name = file_stem(topic) + ".md"
                target = out / name
                tmp = temp_sibling(target)
                tmp.unlink(missing_ok=True)  # a crashed run of ours left it
                try:
                    with open(create_private(tmp), "w", encoding="utf-8") as fh:
                        fh.write(mirror.render(topic, exported))
                    os.replace(tmp, target)
                finally:
                    tmp.unlink(missing_ok=True)  # gone already unless writing failed
                written.add(name)
    finally:
        store.close()
    for old in out.glob("*.md"):  # topics gone from memory leave the mirror too
        if old.name not in written and _is_ours(old):
            old.unlink()
    return len(written)


def _is_ours(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return any(line.strip() == MARK for line, _ in zip(fh, range(20)))
    except (OSError, UnicodeDecodeError):
        return False
