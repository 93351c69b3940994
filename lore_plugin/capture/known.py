"""What extraction is shown of memory, and what a correction may replace.

Each call's prompt lists the existing topic names closest to the slice (extracted topics are
matched back to them), and carries a digest of the existing facts most related to the slice, each
with a short local id ([k1] ...), so the model can skip what is known, reuse its names and
point a correction at the fact it replaces. A correction then supersedes that fact; without
a usable id, only a strict match (a fact or detail under the same topic, nearly the same
words); and never something it only guesses at, nor a statement with a guess.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..core.types import Fragment
from ..recall.heading_projects import project_of
from ..recall.memory import Memory
from ..store import Store
from .extract import Correction
from .transcript import Delta

log = logging.getLogger(__name__)
TOPICS_SENT = 30  # existing topic names listed in a prompt (see topics_for)
TOPICS_IF_UNRELATED = 10
TOPIC_QUERY_CHARS = 2000  # the embedding model reads only the start of a long text anyway
TOPIC_MATCH = 0.82  # embedding similarity at which an extracted topic is an existing one
TOPIC_CANDIDATES = 5  # topics read by meaning, to find one of the session's project among them
KNOWN_SENT = 12  # facts in a prompt's digest
STRICT_MATCH = 0.8  # a correction without an id: cosine to the old fact's text, same topic
FACT_DEPTH = 2
_CLIP = 220


@dataclass(frozen=True)
class Known:
    lines: list[str] = field(default_factory=list)  # "[k1] Topic › Concept › fact (stated, day)"
    ids: dict[str, str] = field(default_factory=dict)  # k1 -> fragment id


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _CLIP else text[: _CLIP - 1] + "…"


def _day(ts: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def known_facts(memory: Memory, query: str, limit: int = KNOWN_SENT, after: int = 0) -> Known:
    """The live facts most related to `query`, of this project or of none, as digest lines
    with local ids (numbered from k{after + 1}, so two digests can be joined). Empty when there
    is nothing to search with."""
    if not query.strip():
        return Known()
    try:
        found = memory.search(query[:TOPIC_QUERY_CHARS], limit=limit * 2, depth=FACT_DEPTH)
    except Exception as exc:  # the digest helps; its absence must not cost the batch
        log.warning("no digest of known facts: %s", exc)
        return Known()
    store = memory.writer
    lines: list[str] = []
    ids: dict[str, str] = {}
    for scored in found.fragments:
        frag = scored.fragment
        if frag.superseded_by or frag.project not in (None, memory.project):
            continue
        path = [store.get(a).summary for a in reversed(store.ancestors(frag.id))]
        local = f"k{after + len(ids) + 1}"
        ids[local] = frag.id
        where = " › ".join(_clip(p) for p in [*path, frag.summary])
        lines.append(f"[{local}] {where} ({frag.basis or 'unknown'}, {_day(frag.created_at)})")
        if len(ids) >= limit:
            break
    return Known(lines, ids)


def topics_for(memory: Memory, delta: Delta, text: str) -> list[str]:
    """The existing topic names the prompt lists, of the session's project only (another
    project's names would be reused for topics match_topic then keeps apart): all of them
    when few, else the TOPICS_SENT closest to what the user asked in this slice (by
    embedding). A topic left out is still found when the answer names it (match_topic)."""
    mine = project_of(memory.project)
    names = memory.writer.topic_names(limit=TOPICS_SENT + 1, project=mine)
    if len(names) <= TOPICS_SENT or not memory.embedder_ready():
        return names[:TOPICS_SENT]
    asked = " ".join(t.text for t in delta.turns if t.role == "user")
    found = memory.search((asked or text)[:TOPIC_QUERY_CHARS], limit=TOPICS_SENT * 2, depth=0,
                          mode="vector").fragments
    closest = [s.fragment.summary for s in found if project_of(s.fragment.project) == mine]
    # Nothing related at all: a few of the most relevant names keep the naming consistent.
    return closest[:TOPICS_SENT] or names[:TOPICS_IF_UNRELATED]


def match_topic(memory: Memory, name: str, about: str) -> str | None:
    """The existing topic an extracted one is: one of the memory's project (project_of; a
    session in no project matches only topics of none) with the same name, else the closest
    of that project in meaning, at TOPIC_MATCH or above. Another project's "Deploys" is not
    this one's: filed under it, a session's knowledge would sit under the other project's
    heading, and placement (heading_projects.py) would then keep it from its own notes."""
    mine = project_of(memory.project)
    for fid, project in memory.writer.topics_named(name):
        if project_of(project) == mine:
            return fid
    if not memory.embedder_ready():
        return None
    # A few candidates: the closest topics may all be another project's.
    for scored in memory.search(f"{name}: {about}", limit=TOPIC_CANDIDATES, depth=0,
                                mode="vector").fragments:
        if scored.similarity >= TOPIC_MATCH and project_of(scored.fragment.project) == mine:
            return scored.fragment.id
    return None


def _topic_of(memory: Memory, frag: Fragment) -> str | None:
    chain = memory.writer.ancestors(frag.id)
    return memory.writer.get(chain[-1]).summary if chain else None


def correction_target(memory: Memory, correction: Correction, known: Known) -> Fragment | None:
    """The live fact a correction replaces: the one its id names in this call's digest; else
    one at depth >= 2 under the topic it names whose words nearly match `old`; else None,
    and the correction's new fact is stored as new knowledge, superseding nothing."""
    store = memory.writer
    fid = known.ids.get((correction.id or "").lower())
    if fid is not None:
        found = store.get_many([fid])
        frag = found.get(fid)
        if frag is not None and not frag.superseded_by:
            return frag
        log.info("correction names %s, which is gone or already superseded", correction.id)
    elif correction.id:
        log.info("correction names an unknown id %r; trying a strict match", correction.id)
    if not memory.embedder_ready():
        return None
    for scored in memory.search(correction.old, limit=5, mode="vector").fragments:
        frag = scored.fragment
        if scored.similarity < STRICT_MATCH:
            break
        if frag.depth < FACT_DEPTH or frag.superseded_by:
            continue
        topic = _topic_of(memory, frag)
        if topic is not None and topic.strip().lower() == correction.topic.strip().lower():
            return frag
    log.info("correction of %r matches nothing strictly: stored as new knowledge",
             _clip(correction.old))
    return None


def weak(basis: str, subagent: bool) -> bool:
    """A guess, or something only an assistant asserted: in a subagent's transcript even a
    'stated' fact was said by the main agent, not the user."""
    return basis == "inferred" or (subagent and basis == "stated")


def protected(old: Fragment) -> bool:
    """Knowledge the user stated or confirmed."""
    return old.basis == "stated" or old.confirmed_at is not None


def may_supersede(old: Fragment, basis: str, subagent: bool) -> bool:
    """A weak claim never replaces what the user stated or confirmed; it is flagged for
    review instead (the caller's job)."""
    return not (protected(old) and weak(basis, subagent))


def flag_for_review(store: Store, new_id: str, old: Fragment, now: float) -> None:
    """A weak claim against a statement: both stay live, and the new one is marked so that
    the viewer and `lore status` can ask a person which holds."""
    meta = dict(store.get(new_id).metadata)
    meta["review"] = {"contradicts": old.id, "at": now}
    store.set_metadata(new_id, meta)
    log.info("not superseding %s (the user's) with a weaker claim; %s flagged for review",
             old.id, new_id)


def journal_supersession(store: Store, old: Fragment, new_id: str, new_summary: str,
                         now: float, by: str) -> None:
    """Every supersession, by extraction or consolidation, can be undone from the journal
    (maintenance/curation.py): it keeps only the two ids."""
    store.journal_add("supersede", new_id, f"{by} replaced “{_clip(old.summary)[:60]}” with "
                      f"“{_clip(new_summary)[:60]}”",
                      {"old": old.id, "new": new_id, "mentions": [old.id, new_id]}, now)
