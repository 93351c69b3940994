"""Headings that only copy the fact below them (issue 30).

When no heading fits a new fact, store_memory's placement (storing._place) makes the missing
levels and, until it names them otherwise, names them after the fact: a concept whose summary
is the fact's summary clipped and whose content is that summary, and outside a project a
topic named the same, "Knowledge about …". Memories already hold such chains, one per fact
that opened a subject (105 topics and 114 concepts for 280 facts on the paraphrase set).
Their vectors are the fact's, so a search for the fact finds it three times, and the path
printed above an answer repeats it ("Trials last 14 days wit… › Trials last 14 days wit…").

A heading *copies* a fragment below it when it says nothing that fragment does not: its
summary is the fragment's summary, or a clipped prefix of it ending in "…", and its content,
once its own name is taken out, holds no word the fragment lacks but "knowledge" (the
placement's "Knowledge about …"). A real heading keeps its place: "Deployment" over
"Deployment uses blue-green" is not a clip (no "…") and not the same summary.

`collapse` gives a copying heading's place in a ranked list of hits to the hit it copies
(one hit for the chain, at its best rank); `plain_path` leaves copying levels out of the
path printed above an answer, and the concept placement named after the answer's own first
words (headingnames: "Checking significance" over "Checking significance daily inflates…")."""

from __future__ import annotations

import functools
from dataclasses import replace

from .heading_names import PLACED_NAME, opens
from .terms import keyword_terms, stem

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from ..core.types import Fragment, ScoredFragment
    from ..store import Store

CLIPPED = "…"
# Words a made heading adds that name nothing: placement's topic content is
# "Knowledge about <the fact's summary>." (storing._topic_name).
HOLLOW = frozenset({"knowledge"})


def _plain(text: str) -> str:
    return " ".join(text.split())


@functools.lru_cache(maxsize=4096)
def _name(summary: str, content: str) -> tuple[str, bool, frozenset[str]]:
    """(the name without its "…", lowercase; whether it was clipped; the stems of the words
    its content adds to it): a heading is compared with every hit below it."""
    name = _plain(summary)
    clipped = name.endswith(CLIPPED)
    bare = name[:-len(CLIPPED)].rstrip() if clipped else name
    # The name is the fragment's own words (a clipped one ends in part of a word, which the
    # fragment's terms would not match): taken out of the content before comparing words.
    rest = _plain(content).replace(name, " ")
    return bare.lower(), clipped, frozenset(stem(t) for t in keyword_terms(rest)
                                            if t not in HOLLOW)


@functools.lru_cache(maxsize=4096)
def _said(summary: str, content: str) -> frozenset[str]:
    return frozenset(stem(t) for t in keyword_terms(f"{summary} {content}"))


def copies(heading: Fragment, below: Fragment) -> bool:
    """Whether `heading` says nothing that `below` (a fragment under it) does not."""
    bare, clipped, adds = _name(heading.summary, heading.content)
    full = _plain(below.summary).lower()
    if not bare or not (full.startswith(bare) if clipped else full == bare):
        return False
    return adds <= _said(below.summary, below.content)


def copying(hits: list[ScoredFragment]) -> dict[str, list[str]]:
    """Each hit that copies hits deeper than it, in text alone: heading id -> their ids,
    deepest first (whether they lie below it is collapse's to check)."""
    frags = [h.fragment for h in hits]
    pairs: dict[str, list[str]] = {}
    for h in frags:
        below = [d for d in frags if d.depth > h.depth and copies(h, d)]
        if below:
            pairs[h.id] = [d.id for d in sorted(below, key=lambda d: -d.depth)]
    return pairs


def collapse(store: Store, hits: list[ScoredFragment], limit: int) -> list[ScoredFragment]:
    """The first `limit` hits with each copying heading replaced by the deepest hit below it
    that it copies: that hit stands once, at the best rank of its chain, with its own
    similarity. A heading whose copy is not among the hits keeps its place (the per-prompt
    descent puts its closest children there). Reads the store only when some hit copies
    another in text: the ancestors of the hits copied."""
    pairs = copying(hits)
    if not pairs:
        return hits[:limit]
    # Few: only hits a heading copies in text, and only in a memory that holds such chains.
    above = {d: set(store.ancestors(d)) for d in {d for ds in pairs.values() for d in ds}}
    into: dict[str, str] = {}
    for head, below_ids in pairs.items():
        target = next((d for d in below_ids if head in above.get(d, ())), None)
        if target is not None:
            into[head] = target
    by_id = {h.fragment.id: h for h in hits}
    out: list[ScoredFragment] = []
    taken: set[str] = set()
    for hit in hits:
        fid = into.get(hit.fragment.id, hit.fragment.id)
        if fid in taken:
            continue
        taken.add(fid)
        own = by_id[fid]
        out.append(own if fid == hit.fragment.id else
                   replace(own, score=max(hit.score, own.score)))
        if len(out) == limit:
            break
    return out


def named_after(level: Fragment, answer: Fragment) -> bool:
    """Whether `level` is a heading placement named after a subject (heading_names) that
    opens `answer`'s summary: the concept made for that very fact ("Checking significance"
    over "Checking significance daily inflates type I error…"), which above it only repeats
    its first words. A heading someone named ("Deployment") is never left out."""
    return (level.metadata.get(PLACED_NAME) == "subject"
            and opens(level.summary, answer.summary))


def plain_path(levels: list[Fragment], answer: Fragment) -> list[Fragment]:
    """The path's levels (topic first) without those that copy the level below them or the
    answer, or that placement named after the answer's own first words: "X… › X… › Y" is
    "X… › Y", and a fact's own copies leave it no path."""
    kept: list[Fragment] = []
    below = answer
    for level in reversed(levels):
        if copies(level, below) or copies(level, answer) or named_after(level, answer):
            continue
        kept.append(level)
        below = level
    return kept[::-1]
