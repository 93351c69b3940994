"""Storing one piece of knowledge the easy way (store_memory, `lore remember`), without copies.

- No parent given: it goes under the best-fitting fragment one level up. When nothing fits
  (an empty memory, a new subject), the missing levels are made for it: the project's topic
  ("Project billing-service"), or outside a project one topic for loose knowledge (LOOSE),
  and under it a concept named after the knowledge's subject and the names it gives
  (heading_names.subject_name: "Canary deploys", "FTS5 search backend (claude-memory)"),
  reused when one of that name is already there. A heading so named takes later knowledge
  only if it names the subject or lies close (_fits). The answer says where it went.

  Why not name them after the fact, as before (issue 30): a heading that copies its first
  fact says nothing of its later children ("Trials last 14 days with full features" came to
  hold "Annual plans get two months free"), outside a project made ~105 topics and 114
  concepts for 280 facts, and each copy was a second search hit for its fact, taking a place
  among the per-prompt hook's ten. The name is read from the summary's shape, without an
  LLM, so a store stays as fast (subject_name: ~30 µs); made levels carry PLACED_NAME in
  their metadata, and consolidation names a "subject" one again from what it holds
  (consolidation/heading_naming.py).
- A near-duplicate is not added: the same summary, or a cosine of NEAR_DUPLICATE or more
  with a live sibling under the same parent. The existing fragment is reinforced instead
  (and confirmed, when the user said it), and the answer gives its id. Extraction uses the
  same check (capture/ingest.py)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.cues import join_cues
from ..core.errors import InvalidInput
from ..core.types import Fragment
from ..safety.redact import redact
from .heading_names import PLACED_NAME, phrase_of, subject_name
from .heading_projects import project_names, project_of, topic_projects
from .memory import PLACEMENT_SIMILARITY, Memory, embedding_text
from .terms import held_terms, keyword_terms, numbers_in, stem

NEAR_DUPLICATE = 0.92
SHARED_TERMS = 1.0  # share of the new text's words the existing one must hold
NAME_CHARS = 80
SUBJECT_SIMILARITY = 0.45  # a neighbour this close may join a subject it does not name
CANDIDATES = 3  # headings of the memory's project looked at for a home, best first
CANDIDATE_POOL = 12  # headings read for them, those of other projects included
COMMON_AMONG = 4  # siblings from which a word most of them hold names no subject
LOOSE = ("Loose knowledge", "Knowledge stored outside any project, a concept for each subject.")


@dataclass(frozen=True)
class Stored:
    fragment: Fragment  # the new fragment, or the existing one it duplicated
    duplicate: bool = False  # True: nothing was added, the existing fragment was reinforced
    created: tuple[Fragment, ...] = ()  # levels made to hold it, topic first
    placed: bool = False  # the parent was chosen here, not given
    provisional: bool = False  # stored with its text's own vector for now (recontext.py)


def near_duplicate(memory: Memory, summary: str, content: str, vector: Any | None,
                   parent_id: str | None, depth: int) -> str | None:
    """A live fragment at `depth` under `parent_id` (among the topics for depth 0) with the
    same summary, or whose vector lies within NEAR_DUPLICATE of `vector` and whose text says
    the same (the same numbers, every word of the new text)."""
    store = memory.reader
    same = store.find_by_summary(summary, depth, parent_id)
    if same or vector is None:
        return same
    siblings = (store.child_ids(parent_id) if parent_id
                else store.topic_ids() if depth == 0 else [])
    if not siblings:
        return None
    memory.index.refresh(store)
    sims = {i: s for i, s in memory.index.similarities(vector, siblings).items()
            if s >= NEAR_DUPLICATE}
    if not sims:
        return None
    # A close vector alone is not enough: MiniLM puts "rule 13 uses value 91" and "rule 14
    # uses value 98" within 0.92 of each other, and "the deploy window is Thursday 09:00" and
    # "... Friday 09:00" at 0.989. A duplicate names the same numbers and adds no word the
    # existing fragment lacks, so a change is never swallowed as a repeat.
    says_it = _says_the_same(summary, content)
    for fid, frag in sorted(store.get_many(list(sims)).items(), key=lambda kv: -sims[kv[0]]):
        if says_it(frag.summary, frag.content):
            return fid
    return None


def _says_the_same(summary: str, content: str) -> Callable[[str, str], bool]:
    """Whether a fragment's (summary, content) names the same numbers as this text and
    holds its every word (numbers_in and held_terms, with each text's words read once and
    remembered)."""
    mine = f"{summary} {content}"
    terms, numbers = keyword_terms(mine), numbers_in(mine)
    stems = [stem(t) for t in terms]

    def check(their_summary: str, their_content: str) -> bool:
        their_numbers, their_stems = _words(f"{their_summary} {their_content}")
        return (their_numbers == numbers
                and sum(s in their_stems for s in stems) >= SHARED_TERMS * len(terms))
    return check


@functools.lru_cache(maxsize=4096)
def _words(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(numbers_in(text), the stems held_terms compares): siblings are checked again at
    every store under their parent, and reading their words is most of that check."""
    terms = keyword_terms(text)
    return (frozenset(t for t in terms if any(c.isdigit() for c in t)),
            frozenset(stem(t) for t in terms))


def may_repeat(memory: Memory, summary: str, content: str, parent_id: str | None,
               depth: int) -> bool:
    """Whether near_duplicate could find a repeat whatever the vector: a sibling with the
    same summary, or one that says the same in words. Without one, the vector is not needed
    to decide (group_commit.py then stores a provisional one)."""
    store = memory.reader
    if store.find_by_summary(summary, depth, parent_id):
        return True
    says_it = _says_the_same(summary, content)
    return any(says_it(*text) for text in _sibling_texts(memory, parent_id, depth))


def _fits(memory: Memory, text: str, depth: int) -> Fragment | None:
    """The best fragment at `depth` for `text`, if it is a real semantic neighbour and
    belongs to the memory's project (heading_projects.py: its topic's project; none outside
    a project). The query's project only boosts its ranking, so without that rule all of a
    second project's notes went under the first's topic when its headings were closer.
    CANDIDATE_POOL hits are read so that headings of other projects ranked first still leave
    CANDIDATES of its own.

    A heading placement named after a subject must also be about it: the new knowledge names
    its subject (_names), or is a close neighbour (SUBJECT_SIMILARITY) of it or of a fact it
    holds. Without that, a short name ("Annual plans") was near enough to anything to gather
    61 of 280 unrelated facts."""
    recall = memory.query(text, depth=depth, limit=CANDIDATE_POOL, reinforce=False)
    owner = topic_projects(memory.reader, [found.fragment for found in recall.fragments])
    mine = project_of(memory.project)
    own = [found for found in recall.fragments
           if found.fragment.id in owner and owner[found.fragment.id] == mine]
    for found in own[:CANDIDATES]:
        if found.similarity < PLACEMENT_SIMILARITY and not recall.keyword_only:
            break
        frag = found.fragment
        if (frag.metadata.get(PLACED_NAME) != "subject" or found.similarity >= SUBJECT_SIMILARITY
                or _names(memory, frag, text)):
            return frag
    return None


def _names(memory: Memory, heading: Fragment, text: str) -> bool:
    """Whether `text` holds a telling word of `heading`'s subject phrase (stems compared):
    the names after the phrase say what the first fact concerned, not what the heading is
    about, and a word of the phrase tells nothing when any note may say it: the project's
    own name ("Atlas (API)" took 64 of 120 notes, every one that said "atlas"), or a word
    most of the heading's siblings hold (COMMON_AMONG or more of them)."""
    return held_terms(_telling_terms(memory, heading), text) > 0


def _telling_terms(memory: Memory, heading: Fragment) -> list[str]:
    """The terms of `heading`'s subject phrase that _names counts (see there)."""
    dull = {stem(word) for word in project_names(memory.project)}
    terms = [t for t in keyword_terms(phrase_of(heading.summary)) if stem(t) not in dull]
    if not terms or not heading.parent_id:
        return terms
    siblings = _sibling_texts(memory, heading.parent_id, heading.depth)
    if len(siblings) < COMMON_AMONG:
        return terms
    held = [_words(f"{summary} {content}")[1] for summary, content in siblings]
    return [t for t in terms if 2 * sum(stem(t) in words for words in held) <= len(held)]


def _sibling_texts(memory: Memory, parent_id: str | None, depth: int
                   ) -> list[tuple[str, str]]:
    """(summary, content) of the live fragments under `parent_id` at `depth` (the topics for
    depth 0 without a parent): two columns where the store offers it, else whole rows."""
    store = memory.reader
    texts = getattr(store, "sibling_texts", None)
    if texts is not None:  # the two columns only: reading whole rows was most of a store
        return list(texts(parent_id, depth))
    siblings = (store.child_ids(parent_id) if parent_id
                else store.topic_ids() if depth == 0 else [])
    return [(f.summary, f.content) for f in store.get_many(siblings).values()]


def _topic_name(memory: Memory) -> tuple[str, str, str]:
    """(name, description, how it was named) of the topic a placed fact goes under when no
    topic fits: the project's, else the one for loose knowledge."""
    if memory.project and memory.project != "/":
        name = os.path.basename(memory.project.rstrip("/")) or memory.project
        return (_clip(f"Project {name}"), f"Knowledge about the project in {memory.project}.",
                "project")
    return (*LOOSE, "loose")


def _home_topic(memory: Memory, source: str) -> tuple[Fragment, tuple[Fragment, ...]]:
    """The topic of _topic_name, found or made (and then answered as made). A topic of that
    name from another project (two repositories called "api", or a "Loose knowledge" an
    extraction made in a project) is not it: the name followed by the project's key is
    tried next, so the two never share a topic."""
    name, about, how = _topic_name(memory)
    mine = project_of(memory.project)
    names = (name, _clip(f"{name} ({mine or 'no project'})"))
    for candidate in names:
        existing = memory.reader.find_by_summary(candidate, depth=0)
        if existing:
            topic = memory.get(existing)
            if project_of(topic.project) == mine or candidate == names[-1]:
                return topic, ()
        else:
            topic = memory.store(about, candidate, depth=0, source=source,
                                 metadata={PLACED_NAME: how})
            return topic, (topic,)
    raise AssertionError("unreachable: the last name is always answered")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1].rstrip() + "…"


def _place(memory: Memory, summary: str, content: str, depth: int, source: str
           ) -> tuple[Fragment, tuple[Fragment, ...]]:
    """The parent one level up: the best that fits, else a branch made under the deepest
    level that fits (or the project's topic)."""
    text = f"{summary}\n{content}"
    for level in range(depth - 1, -1, -1):
        anchor = _fits(memory, text, level)
        if anchor is not None:
            break
    if anchor is not None and anchor.depth == depth - 1:
        return anchor, ()
    created: list[Fragment] = []
    if anchor is None:
        anchor, made = _home_topic(memory, source)
        created.extend(made)
    subject = _clip(subject_name(summary, project_names(memory.project)))
    while anchor.depth < depth - 1:
        # A heading of that subject already there is its home, close in vector or not.
        existing = memory.reader.find_by_summary(subject, anchor.depth + 1, anchor.id)
        if existing:
            anchor = memory.get(existing)
            continue
        anchor = memory.store(subject, subject, parent_id=anchor.id, depth=anchor.depth + 1,
                              source=source, metadata={PLACED_NAME: "subject"})
        created.append(anchor)
    return anchor, tuple(created)


@dataclass(frozen=True)
class Placed:
    """A store request checked, redacted and placed, waiting for its vector: what
    store_knowledge does before the model runs on the text it keeps (group_commit.py embeds
    many of these in one batch)."""
    content: str
    summary: str
    depth: int
    parent: Fragment | None
    created: tuple[Fragment, ...]
    placed: bool  # the parent was chosen here, not given
    source: str
    importance: float
    cues: str = ""  # clean_cues's form, redacted when stored (core/cues.py)

    @property
    def text(self) -> str:
        """What is embedded: the text in the context of its parent."""
        return embedding_text(self.summary, self.content,
                              self.parent.summary if self.parent else None)


def place_knowledge(memory: Memory, content: str, summary: str, parent_id: str | None = None,
                    depth: int = 2, source: str = "agent", importance: float = 0.6,
                    cues: str = "") -> Placed:
    """store_knowledge's first half: checks, redaction, and the parent (given, found, or
    made)."""
    for value, name in ((content, "content"), (summary, "summary")):
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"{name} must be non-empty text")
    # Redacted before it is embedded or compared, as Memory.store does.
    content, summary = redact(content.strip()), redact(summary.strip())
    created: tuple[Fragment, ...] = ()
    parent: Fragment | None = None
    if parent_id:
        parent = memory.get(parent_id)
    elif isinstance(depth, int) and not isinstance(depth, bool) and depth > 0:
        parent, created = _place(memory, summary, content, depth, source)
    return Placed(content, summary, depth, parent, created, parent_id is None, source,
                  importance, cues)


def keep_placed(memory: Memory, placed: Placed, vector: Any | None,
                no_repeat: bool = False, fid: str | None = None) -> Stored:
    """store_knowledge's second half, once `vector` (of placed.text) is known: reinforces the
    near-duplicate it repeats, or stores it. `no_repeat`: may_repeat already found no sibling
    it could repeat, so near_duplicate, which only ever answers such a sibling, is skipped.
    `fid`: the id to store it under (one the store journal reserved), else a new one."""
    parent, depth, source = placed.parent, placed.depth, placed.source
    if not no_repeat and not placed.created and (parent is None or parent.depth == depth - 1):
        same = near_duplicate(memory, placed.summary, placed.content, vector,
                              parent.id if parent else None, depth)
        if same is not None:
            memory.reinforce([same])
            _add_cues(memory, same, placed.cues)  # the repeat's words find it too
            if source in ("remember", "user"):  # the user said it again: confirmed
                memory.writer.confirm([same], memory.clock())
            return Stored(memory.get(same), duplicate=True, placed=placed.placed)
    frag = memory.store(placed.content, placed.summary, parent.id if parent else None, depth,
                        placed.importance, source=source, vector=vector, fid=fid,
                        cues=placed.cues)
    return Stored(frag, created=placed.created, placed=placed.placed and depth > 0)


def _add_cues(memory: Memory, fid: str, cues: str) -> None:
    if cues:
        held = memory.writer.get(fid).cues
        if join_cues(held, cues) != held:
            memory.writer.update_text(fid, cues=join_cues(held, cues))


def keep_provisionally(memory: Memory, placed: Placed, provisional: Any,
                       exact: Callable[[str], Any], fid: str | None = None
                       ) -> tuple[Stored, bool]:
    """keep_placed with one model run instead of two when it can: unless a sibling could be
    a repeat (may_repeat), the decision does not depend on the vector, and the fragment is
    stored with `provisional` (its placement query's vector). Otherwise `exact(text)` gives
    the vector keep_placed needs. Returns the answer and whether the vector is provisional."""
    parent, depth = placed.parent, placed.depth
    if (provisional is None or not placed.created and (parent is None or parent.depth == depth - 1)
            and may_repeat(memory, placed.summary, placed.content,
                           parent.id if parent else None, depth)):
        return keep_placed(memory, placed, exact(placed.text), fid=fid), False
    return keep_placed(memory, placed, provisional, no_repeat=True, fid=fid), True


def store_knowledge(memory: Memory, content: str, summary: str, parent_id: str | None = None,
                    depth: int = 2, source: str = "agent", importance: float = 0.6,
                    cues: str = "") -> Stored:
    """Stores one fragment where it belongs, or reinforces the one it repeats (joining
    `cues`, clean_cues's form, to its own)."""
    placed = place_knowledge(memory, content, summary, parent_id, depth, source, importance,
                             cues)
    return keep_placed(memory, placed, memory.embed_one(placed.text))


def stored_text(stored: Stored, parent: Fragment | None) -> str:
    """What store_memory answers: what happened, the id, and where it went."""
    from . import render

    frag = stored.fragment
    if stored.duplicate:
        lines = [f"Already known, so nothing was added: reinforced "
                 f"{render.fragment_line(frag, content=False)}", f"id: {frag.id}",
                 "Store it again with a different summary if it is new knowledge."]
    else:
        lines = [f"Stored {render.fragment_line(frag, content=False)}", f"id: {frag.id}"]
    for made in stored.created:
        lines.append(f"made {render.depth_name(made.depth)} [{render.short_id(made.id)}] "
                     f"{render.clip(made.summary, 100)} to hold it")
    if parent is not None:
        verb = "placed under" if stored.placed and not stored.created else "under"
        lines.append(f"{verb} {render.fragment_line(parent, content=False)}")
    return render.recalled("\n".join(lines))
