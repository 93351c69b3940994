"""The evidence about each answer a prompt might get (issue 30): how close its meaning is
(its cosine with the prompt, and that of the heading it was found under), and how much of the
prompt's rare words it holds with the branch above it (its own text and its ancestors',
weighted by how rare each word is in this memory). prompt_judge.py decides on it.

Keyword coverage is read with the keyword index's own tokenizer and document frequencies
(store.term_statistics), so "releasing" meets "released" and a word that most notes hold
weighs little, while a rare word the prompt names and the memory never holds counts against
every candidate: a prompt about someone else's life is covered by nothing here, however close
its meaning. The weights are Lucene's smoothed IDF, not FTS5's: FTS5 floors a word that half
the rows hold at nothing, and in a small memory (a new user's few dozen notes) that is every
word the prompt and its answer share.

A prompt that names something (a capitalised word inside a sentence: "Jon", "Paris", "Rust")
that no note holds is about something this memory has never heard of (Candidate.stranger):
prompt_semantic.py does not answer it on meaning alone."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from .asked_for import asked_for
from .terms import keyword_terms

# A word written with a capital after another word of its sentence: a name ("Jon", "Paris",
# "JSON"), not a sentence's first word.
_NAMED = re.compile(r"(?<![.!?:;]) +([A-Z][\w'\u2019.\-]*)")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..core.types import Fragment
    from ..store import Store


@dataclass(frozen=True)
class Candidate:
    """One answer the prompt might get, with the evidence for it."""

    fragment: Fragment
    cosine: float  # its own cosine with the prompt
    branch: float  # the cosine of the heading it was found under (or of its parent), else 0
    below: bool  # reached only by descending from a heading search found
    coverage: float = 0.0  # the share of the prompt's IDF mass it and its ancestors hold
    path: str = ""  # its ancestors' names, topic first
    own: float = 0.0  # the share of that mass its own text holds, without its ancestors
    rank: int = 0  # the place, in hybrid search's order, of the hit it was found by (0: first)
    child: int = -1  # its place among its heading's children closest to the prompt (-1: none)
    rare: int = -1  # its place among the hits for the prompt's rarest words (-1: not one)
    dated: bool = False  # stored on the day a prompt about that day names (prompt_candidates)
    follows: str = ""  # the id of the candidate question it comes right after (prompt_replies)
    stranger: bool = False  # the prompt names (a capitalised word) what no note here holds
    # The prompt's own words, for the names rule (prompt_names.py): how many rows of the
    # memory hold each of its keyword terms (the same for every candidate, 0: none), and
    # which of them this candidate's own text holds, in the prompt's order; and the rows.
    term_rows: tuple[int, ...] = ()
    held: tuple[bool, ...] = ()
    rows: int = 0
    # The prompt's keyword terms themselves, in that order, and which of them this candidate
    # holds with its branch (its own text or an ancestor's): what is asked (asked_for.py).
    terms: tuple[str, ...] = ()
    held_branch: tuple[bool, ...] = ()
    asked: tuple[str, ...] = ()  # the terms of the phrase the prompt asks about, head last
    # The cosine of its closest cue phrase with the prompt (embedding/cue_vectors.py); 0 when
    # it has no cue vectors (no cues, or not embedded yet).
    cue: float = 0.0


def idf(rows_holding: int, rows: int) -> float:
    """Smoothed inverse document frequency, always above 0; a word no row holds weighs as one
    that a single row holds (it says something about the prompt, no more than the rarest)."""
    n = max(rows_holding, 1)
    return math.log(1 + (max(rows, n) - n + 0.5) / (n + 0.5))


def coverage(terms: dict[str, tuple[frozenset[str], int]], rows: int,
             docs: dict[str, frozenset[str]]) -> dict[str, float]:
    """For each fragment, the share of the prompt's IDF mass its tokens hold, 0..1. A term
    is held when all its tokens are."""
    weights = [(toks, idf(n, rows)) for toks, n in terms.values()]
    mass = sum(w for _, w in weights)
    if mass <= 0:
        return {fid: 0.0 for fid in docs}
    return {fid: sum(w for toks, w in weights if toks <= have) / mass
            for fid, have in docs.items()}


def names(prompt: str) -> set[str]:
    """The keyword terms of the prompt's words written with a capital inside a sentence."""
    return {t for word in _NAMED.findall(prompt) for t in keyword_terms(word)}


def with_coverage(store: Store, prompt: str, found: list[Candidate],
                  ancestors: dict[str, list[str]]) -> list[Candidate]:
    """The candidates with their keyword coverage: the share of the prompt's IDF mass that
    their own text and their ancestors' texts hold together: the branch a note sits in says
    what it is about (its path shows the ancestors' names beside it when it is injected).
    `ancestors`: each candidate's ancestor ids, as paths() read them."""
    terms = keyword_terms(prompt)
    if not terms or not found:
        return found
    rows, stats = store.term_statistics(terms)
    ids = {c.fragment.id for c in found} | {a for chain in ancestors.values() for a in chain}
    tokens = store.fragment_tokens(sorted(ids))
    docs, alone = {}, {}
    for c in found:
        alone[c.fragment.id] = tokens.get(c.fragment.id, frozenset())
        held = set(alone[c.fragment.id])
        for a in ancestors.get(c.fragment.id, []):
            held |= tokens.get(a, frozenset())
        docs[c.fragment.id] = frozenset(held)
    share, own = coverage(stats, rows, docs), coverage(stats, rows, alone)
    # The same for every candidate: it says what the prompt is about, not what one holds.
    stranger = any(stats[t][1] == 0 for t in names(prompt) if t in stats)
    counts = tuple(n for _, n in stats.values())
    words, asked = tuple(stats), asked_for(prompt)
    return [replace(c, coverage=share.get(c.fragment.id, 0.0), own=own.get(c.fragment.id, 0.0),
                    stranger=stranger, term_rows=counts, rows=rows, terms=words, asked=asked,
                    held=tuple(toks <= alone[c.fragment.id] for toks, _ in stats.values()),
                    held_branch=tuple(toks <= docs[c.fragment.id] for toks, _ in stats.values()))
            for c in found]
