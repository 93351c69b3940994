"""Naming the headings placement made (phase 3a, before re-summarisation). store_memory names
a heading it has to make from its first fact's summary, without an LLM
(recall/heading_names.py: "Canary deploys"), and marks it PLACED_NAME = "subject". About one
name in twenty reads a verb as a noun ("mypy runs"), and a name that fit the first fact often
fits the later ones badly; a fact's vector embeds its parent's name and the per-prompt hook
prints the path, so a bad name costs recall and reads badly. This phase asks the LLM to name
such headings from what they hold.

- Due: a live heading marked "subject" with at least two children, not named here yet; or one
  named here ("consolidated") that gained a child since (NAMED_AT, as resummarise does with
  RESUMMARISED_AT). The project's topic and "Loose knowledge" ("project", "loose") are left as
  they are: the one is the project's own name, the other a bucket of unrelated subjects that
  no name of its contents would fit for long. A heading a person edited carries no
  PLACED_NAME (maintenance/curation.py clears it), so it is never due again.
- One call_tool prompt a batch, the memory framed as data and redacted before it leaves; the
  answer's names are checked (length, words, no markup, nothing redaction would change) and
  a name a live sibling already has is skipped, not merged (merging is phase 1's job).
- A rename writes the name, the heading's and its children's new vectors (they embed the
  parent's name: memory_base.embedding_text), the mark and an undoable journal entry in one
  short transaction; the model runs before it, never under it. Without the model nothing is
  renamed: the children's vectors would name the old heading."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..core.types import Fragment
from ..embedding.embedder import Embedder, to_blob
from ..llm.client import LLM
from ..recall.heading_names import PLACED_NAME
from ..recall.memory import embedding_text
from ..recall.memory_writes import reembed
from ..recall.render import clip
from ..safety.redact import redact
from ..store import Store
from .llm_phases import (
    DATA_CLAUSE,
    Activity,
    PhaseOutcome,
    answers,
    due_only,
    families,
    meta_of,
    per_item_tool,
    since,
)

log = logging.getLogger(__name__)
NAMED_AT = "named_at"  # metadata key: when this phase last named the heading
CONSOLIDATED = "consolidated"  # PLACED_NAME once this phase named it
RENAMEABLE = ("subject", CONSOLIDATED)
HEADINGS_PER_CALL = 10
CHILDREN_SHOWN = 12  # per heading, the newest
NAME_CHARS = 60
NAME_WORDS = 6
LISTED = 50
EMBED_BATCH = 64  # texts a model run: a heading may hold hundreds of children
# Markup, redaction marks and control characters name nothing and could break a frame.
_UNSAFE = re.compile(r"[<>{}\[\]`|\\]|[\x00-\x1f\x7f]")
_QUOTES = "\"'“”‘’"

NAMING_SYSTEM = (
    "You name the headings of a long-term memory. Each heading below was named from the first "
    "item stored under it; name it again from everything it holds now: 2 to 6 words, at most "
    f"{NAME_CHARS} characters, a noun phrase saying what its items are about (\"Canary "
    "deploys\", \"FTS5 search backend\"), spelled as the items spell their names, with no "
    "trailing period, no quotes and no markup. When the current name already fits, give it "
    "unchanged. Call record_heading_names once, with one entry per heading id (h1, h2, ...). "
    + DATA_CLAUSE)
NAMING_TOOL = per_item_tool(
    "record_heading_names", "The new name of each heading, keyed by its local id.", "names",
    "name", {"type": "string", "description": "2 to 6 words"}, "h1")


class _Name(BaseModel):
    id: str
    name: str


class _Names(BaseModel):
    names: list[_Name]


@dataclass(frozen=True)
class _Rename:
    """A rename with the vectors made for it before the write: the heading's, and each
    child's as it read then ((summary, content) checked again under the lock)."""

    heading: str
    old: str
    name: str
    vector: bytes
    children: dict[str, tuple[str, str, bytes]]


def due_headings(activity: Activity) -> list[str]:
    """Placed headings with two children or more not named since their last child came,
    the most recently grown first."""
    due = [(last, pid) for pid, _, raw, count, _, last in activity
           if count >= 2 and (meta := meta_of(raw)).get(PLACED_NAME) in RENAMEABLE
           and last > since(meta, NAMED_AT, float("-inf"))]
    return [pid for _, pid in sorted(due, reverse=True)]


def clean_name(raw: str) -> str | None:
    """The model's name as a heading, or None when it is no fit name: empty, too long, too
    many words, markup, or anything redaction would change (a secret names nothing)."""
    name = " ".join(raw.split()).strip(_QUOTES + " ").rstrip(".").strip()
    if (not name or len(name) > NAME_CHARS or len(name.split()) > NAME_WORDS
            or _UNSAFE.search(name) or redact(name) != name):
        return None
    return name


def _block(local: str, heading: Fragment, children: list[Fragment], parent: str | None) -> str:
    lines = [f"Heading {local}: {clip(heading.summary, 80)}"]
    if parent:
        lines.append(f"Under: {clip(parent, 80)}")
    lines.append(f"Holds ({len(children)} shown, newest last):")
    for child in children:
        body = "" if child.content == child.summary else f": {clip(child.content, 200)}"
        lines.append(f"- {clip(child.summary, 160)}{body}")
    return "\n".join(lines)


def name_headings(store: Store, activity: Activity, llm: LLM | None,
                  embedder: Embedder | None, now: float, dry_run: bool) -> PhaseOutcome:
    due = due_headings(activity)
    if dry_run or llm is None:
        return due_only(store, due)
    if embedder is None or not getattr(embedder, "available", True):
        outcome = due_only(store, due)
        outcome.stopped = ("no embedding model: a renamed heading's children would keep "
                           "vectors of its old name")
        return outcome
    outcome = PhaseOutcome(due=len(due))
    cache, load = families(store, CHILDREN_SHOWN)
    parents: dict[str, str | None] = {}

    def parent_name(heading: Fragment) -> str | None:
        if heading.id not in parents:
            pid = heading.parent_id
            found = store.get_many([pid], with_parent=False).get(pid) if pid else None
            parents[heading.id] = found.summary if found else None
        return parents[heading.id]

    def render(batch: list[str]) -> str:
        return "\n\n".join(_block(f"h{i + 1}", *load(h), parent_name(load(h)[0]))
                           for i, h in enumerate(batch))

    def nameable() -> Iterator[str]:  # two live children or more: a superseded one names nothing
        for hid in due:
            if len(load(hid)[1]) >= 2:
                yield hid
            else:
                _mark(store, hid, now, None)

    for batch, parsed in answers(llm, outcome, nameable(), render, HEADINGS_PER_CALL,
                                 NAMING_SYSTEM, NAMING_TOOL, _Names, "heading names"):
        names = _checked(parsed, {f"h{i + 1}": h for i, h in enumerate(batch)}, cache, outcome)
        renames = {h: n for h, n in names.items() if n is not None
                   and n.casefold() != cache[h][0].summary.casefold()}
        plans = _embedded(store, embedder, {h: (cache[h][0], n) for h, n in renames.items()},
                          {h: parent_name(cache[h][0]) for h in renames})
        stale = _write(store, plans, names, now, outcome)
        if stale:  # a child edited meanwhile: embedded now, from its new text
            reembed(store, embedder, stale)
    return outcome


def _checked(parsed: _Names, local: dict[str, str], cache: dict[str, Any],
             outcome: PhaseOutcome) -> dict[str, str | None]:
    """heading -> its checked new name, or None when the model's name was refused. Unknown
    ids and a second name for the same heading are ignored."""
    out: dict[str, str | None] = {}
    for item in parsed.names[:len(local)]:
        hid = local.get(item.id.strip())
        if hid is None or hid in out:
            continue
        out[hid] = clean_name(item.name)
        if out[hid] is None:
            outcome.rejected += 1
            log.warning("heading name refused for '%s': %r", clip(cache[hid][0].summary, 60),
                        clip(item.name, 80))
    return out


def _embedded(store: Store, embedder: Embedder, renames: dict[str, tuple[Any, str]],
              parents: dict[str, str | None]) -> list[_Rename]:
    """The renames (heading as the prompt showed it, new name) with their vectors, made in
    one model run before any lock is taken."""
    if not renames:
        return []
    texts: list[str] = []
    layout: list[tuple[str, list[Any]]] = []
    for hid, (heading, name) in renames.items():
        content = name if heading.content == heading.summary else heading.content
        kids = list(store.get_many(store.child_ids(hid), with_parent=False).values())
        texts.append(embedding_text(name, content, parents[hid]))
        texts += [embedding_text(k.summary, k.content, name) for k in kids]
        layout.append((hid, kids))
    blobs = [to_blob(v) for start in range(0, len(texts), EMBED_BATCH)
             for v in embedder.embed(texts[start:start + EMBED_BATCH])]
    plans, at = [], 0
    for hid, kids in layout:
        children = {k.id: (k.summary, k.content, blobs[at + 1 + i]) for i, k in enumerate(kids)}
        heading, name = renames[hid]
        plans.append(_Rename(hid, heading.summary, name, blobs[at], children))
        at += 1 + len(kids)
    return plans


def _mark(store: Store, hid: str, now: float, placed: str | None) -> None:
    meta = dict(store.get(hid).metadata)
    meta[NAMED_AT] = now
    if placed is not None:
        meta[PLACED_NAME] = placed
    store.set_metadata(hid, meta)


def _write(store: Store, plans: list[_Rename], names: dict[str, str | None], now: float,
           outcome: PhaseOutcome) -> list[str]:
    """Applies the renames, each only if its heading is as it was read, and marks every
    heading answered for. Returns the children whose vectors must still be made."""
    stale: list[str] = []
    planned = {p.heading for p in plans}
    with store.write():
        for hid in names:
            if hid not in planned and (h := store.get_many([hid]).get(hid)) is not None \
                    and h.metadata.get(PLACED_NAME) in RENAMEABLE:
                # The name fits, or the model's was refused: asked again when a child comes.
                _mark(store, hid, now, CONSOLIDATED if names[hid] else None)
        for plan in plans:
            current = store.get_many([plan.heading]).get(plan.heading)
            if (current is None or current.superseded_by or current.summary != plan.old
                    or current.metadata.get(PLACED_NAME) not in RENAMEABLE):
                continue  # merged, forgotten or edited by a person meanwhile
            clash = store.find_by_summary(plan.name, current.depth, current.parent_id)
            if clash is not None and clash != plan.heading:
                log.info("heading '%s' not renamed '%s': a sibling has that name",
                         clip(plan.old, 60), plan.name)
                _mark(store, plan.heading, now, None)
                continue
            content = plan.name if current.content == current.summary else None
            store.update_text(plan.heading, summary=plan.name, content=content,
                              embedding=plan.vector)
            _mark(store, plan.heading, now, CONSOLIDATED)
            kids = store.get_many(store.child_ids(plan.heading), with_parent=False)
            fresh = [(cid, plan.children[cid][2]) for cid, kid in kids.items()
                     if plan.children.get(cid, ("", "", b""))[:2] == (kid.summary, kid.content)]
            if fresh:
                store.set_embeddings(fresh)
            done = {cid for cid, _ in fresh}
            stale += [cid for cid in kids if cid not in done]
            store.journal_add(
                "edit", plan.heading, f"consolidation renamed “{clip(plan.old, 40)}” → "
                f"“{clip(plan.name, 40)}”", {"summary": plan.old, "content": current.content,
                                            "by": "consolidation"}, now)
            outcome.done += 1
            if len(outcome.items) < LISTED:
                outcome.items.append(f"'{plan.old}' → '{plan.name}'")
    return stale
