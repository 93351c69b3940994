"""Score fusion: how well one fragment matches a query, from its cosine and its BM25 score,
with the keyword signal trusted only as far as the best keyword match covers the query's
rare words (issue 16's adaptive fusion; every figure behind it is in bench/README.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..core.types import Fragment

COSINE_SHARE = 0.5  # fusion weight of the cosine; BM25 gets the rest (when fully trusted)
TRUST_FROM = 0.6  # IDF-mass share of the best keyword match from which BM25 is fully trusted
TRUST_POWER = 3  # how steeply trust falls below that


def idf(rows_holding: int, rows: int) -> float:
    """FTS5's own inverse document frequency (fts5_aux.c), floored as it floors it. `rows`
    is taken as at least `rows_holding`: the hub caches its row count (term_counts.ROWS_TTL)
    while term counts are fresh, and a negative ratio has no logarithm."""
    rows = max(rows, rows_holding) if rows else 0
    value = math.log((rows - rows_holding + 0.5) / (rows_holding + 0.5)) if rows else 0.0
    return value if value > 0 else 1e-6


def keyword_coverage(terms: dict[str, tuple[frozenset[str], int]], rows: int,
                     docs: dict[str, frozenset[str]]) -> dict[str, float]:
    """For each fragment, the share of the query's IDF mass its text holds, 0..1: a match on
    the query's rare words counts, one on its common words alone counts little. A term is
    held when all its tokens are (a phrase's word order is not checked). A term no fragment
    holds weighs as one that a single fragment holds: it says something about the query,
    but no more than the rarest word that is there."""
    weights = {toks: idf(max(n, 1), rows) for toks, n in terms.values()}
    mass = sum(weights.values())
    if mass <= 0:
        return {fid: 1.0 for fid in docs}
    return {fid: sum(w for toks, w in weights.items() if toks <= have) / mass
            for fid, have in docs.items()}


def keyword_trust(coverage: float) -> float:
    """How far to trust the keyword signal of a query whose best keyword match holds this
    share of its IDF mass: fully from TRUST_FROM on, falling steeply below it. Measured on
    bench/: a paraphrase's best keyword match (a near miss) holds about a quarter; LoCoMo's
    and the peer corpus's best matches hold 0.6 to 0.75 (open-domain questions 0.33)."""
    return min(1.0, max(coverage, 0.0) / TRUST_FROM) ** TRUST_POWER


@dataclass
class Fusion:
    """How well one fragment matches the query text: score-level fusion of its cosine and its
    BM25 score, each scaled by the best among the candidates (so both lie in 0..1). On both
    benchmarks in bench/ this beats reciprocal rank fusion, which throws the margins away.
    The BM25 share adapts to the query: it is (1 - COSINE_SHARE) times the trust that the
    best keyword match earns by the share of the query's IDF mass it holds (`coverage`), so
    a query that only shares common or incidental words with the memory is ranked by
    meaning. Within a query, a candidate's BM25 counts in full only when it holds as much of
    that mass as the best match does (`covered`, measured for the best BM25 matches; weaker
    ones keep their score) or means what the query means (its scaled cosine), whichever is
    more: a note about something else that shares one of the query's words ("customers")
    gets little for it, while one that holds half of a two-part question, or that the
    query's meaning also points to, keeps its keyword evidence."""

    mode: str
    cos: dict[str, float]
    kw: dict[str, float]
    frags: dict[str, Fragment]
    keyword_only: bool
    coverage: float = 1.0
    covered: dict[str, float] = field(default_factory=dict)
    trust: float = field(default=1.0, init=False)
    _tops: tuple[float, float] = field(default=(0.0, 0.0), init=False)

    def __post_init__(self) -> None:
        top_cos = max((self.cos.get(i, 0.0) for i in self.frags), default=0.0)
        top_kw = max((self.kw.get(i, 0.0) for i in self.frags), default=0.0)
        self._tops = (top_cos, top_kw)
        self.trust = keyword_trust(self.coverage)

    def __call__(self, fid: str) -> float:
        top_cos, top_kw = self._tops
        c = max(self.cos.get(fid, 0.0), 0.0) / top_cos if top_cos > 0 else 0.0
        k = self.kw.get(fid, 0.0) / top_kw if top_kw > 0 else 0.0
        if self.mode == "vector":
            return c
        if self.mode == "keyword" or self.keyword_only:
            return k
        held = self.covered.get(fid)
        if held is not None and self.coverage > 0:
            k *= max(min(held / self.coverage, 1.0), c)
        share = (1 - COSINE_SHARE) * self.trust
        return (1 - share) * c + share * k
