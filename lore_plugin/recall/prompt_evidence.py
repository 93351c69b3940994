"""The evidence about each answer a prompt might get (issue 30): how close its meaning is
(its cosine with the prompt, and that of the heading it was found under), how much of the
prompt's rare words its line holds (path and text, weighted by how rare each word is in this
memory), where it stood in hybrid search, and how deep it sits. prompt_judge.py decides on it.

Keyword coverage is read with the keyword index's own tokenizer and document frequencies
(store.term_statistics, fusion.keyword_coverage), so "releasing" meets "released" and a name
that every note holds weighs next to nothing, while a rare word the prompt names and the
memory never holds counts against every candidate: a prompt about someone else's life is
covered by nothing here, however close its meaning."""

from __future__ import annotations

from dataclasses import dataclass

from .fusion import keyword_coverage
from .terms import keyword_terms

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
    rank: int  # its place in hybrid search's order (answers of one heading share a place)
    coverage: float = 0.0  # the share of the prompt's IDF mass its path and text hold
    path: str = ""  # its ancestors' names, topic first

    @property
    def depth(self) -> int:
        return self.fragment.depth


def with_coverage(store: Store, prompt: str, found: list[Candidate],
                  ancestors: dict[str, list[str]]) -> list[Candidate]:
    """The candidates with their keyword coverage: the share of the prompt's IDF mass that
    their own text and their ancestors' names hold together (what the injected line holds).
    `ancestors`: each candidate's ancestor ids, as paths() read them."""
    terms = keyword_terms(prompt)
    if not terms or not found:
        return found
    rows, stats = store.term_statistics(terms)
    ids = {c.fragment.id for c in found} | {a for chain in ancestors.values() for a in chain}
    tokens = store.fragment_tokens(sorted(ids))
    docs = {}
    for c in found:
        held = set(tokens.get(c.fragment.id, frozenset()))
        for a in ancestors.get(c.fragment.id, []):
            held |= tokens.get(a, frozenset())
        docs[c.fragment.id] = frozenset(held)
    share = keyword_coverage(stats, rows, docs)
    return [Candidate(c.fragment, c.cosine, c.branch, c.below, c.rank,
                      share.get(c.fragment.id, 0.0), c.path) for c in found]
