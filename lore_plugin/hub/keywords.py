"""Keyword search with PostgreSQL's full text search, fed into the same fusion as FTS5.

The caller builds an FTS5 expression (recall/terms.fts_expression: an OR of quoted terms);
here each quoted term becomes a phrase query over the `tsv` column (english stemming, as
FTS5's porter tokenizer stems). A match scores

    sum over the query's terms it holds of  idf(term) * ts_rank(tsv, term, 1)

idf being FTS5's own (recall/fusion.idf) from the term's document count in the space
(term_counts.py: the space's row count, idf's N, is re-read at most once a minute, a term's
count once a second), and ts_rank's normalisation 1 dividing by the log of the document
length, with the summary weighted A (1.0) and the content B (0.5), as FTS5's bm25(2.0, 1.0)
weighs them.
That is BM25's shape (rare words count more, repeats saturate, long texts count less). Like
FTS5's bm25 the score is returned negated (lower is better), and fusion divides a query's
scores by the best of them, so both backends' keyword evidence lies in 0..1 before it is fused.

The matches are read from `fragment_words` (words_sql.py: the space, id and tsvector of each
fragment, about 300 bytes a row against the 2.3 KB of a `fragments` row with its vector), and
only those of the query's rarest terms (driving_terms): reading every match of every term
made a query's cost grow with the space (issue 28). Each row's memory state (recall blends a
keyword-only hit's relevance score into its rank) comes from fragment_state, joined in the
same statement (state.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..core.types import Fragment
from ..store.rows import FRAGMENT_NUMBERS, row_to_fragment
from .state import STATE_JOIN, joined
from .term_counts import TermCounts

_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
# The candidates are the fragments holding one of the query's rarest terms, as many terms as
# hold this many matches together (at least the rarest one). Each candidate is then scored on
# every term of the query, so its score is exactly the full search's; what is left out is a
# fragment that holds only the query's common terms, once its rare ones hold this many
# matches. Below it (every query of a small space) the search is the full one.
DRIVE_BUDGET = 10000
# The candidates' rows are read once (MATERIALIZED, with their tsvector), by one bitmap scan
# of the driving terms' OR; each is ranked on every term it holds, with the terms' document
# counts given, in a subquery per candidate (a join and GROUP BY sorted every pair by id).
# Equal scores (the same text in several fragments) are ordered by id. The row count is
# cached (term_counts.ROWS_TTL) while a term's count is fresh, so in a growing space a term
# can be held by more rows than the count says: N is at least the term's count, or ln would
# be given a negative number and the whole search fail.
_SEARCH = (
    "WITH w AS MATERIALIZED (SELECT t, phraseto_tsquery('english', t) AS q, d "
    "FROM unnest(%(t)s::text[], %(d)s::float8[]) AS x(t, d)), "
    "c AS MATERIALIZED (SELECT f.id, f.tsv FROM fragment_words f WHERE f.space = %(s)s "
    "AND f.tsv @@ ({drive})), "
    "h AS (SELECT c.id, (SELECT sum(greatest(ln((greatest(%(n)s::float8, w.d) - w.d + 0.5) "
    "/ (w.d + 0.5)), "
    "1e-6) * ts_rank('{{0.1, 0.2, 0.5, 1.0}}', c.tsv, w.q, 1)) FROM w WHERE numnode(w.q) > 0 "
    "AND c.tsv @@ w.q) AS score FROM c ORDER BY score DESC, c.id LIMIT %(k)s) "
    "SELECT " + joined(FRAGMENT_NUMBERS) + ", tsvector_to_array(c.tsv), h.score "
    "FROM h JOIN c ON c.id = h.id JOIN fragments f ON f.space = %(s)s AND f.id = h.id "
    + STATE_JOIN + " ORDER BY h.score DESC, h.id")


def fts_terms(match: str) -> list[str]:
    """The quoted terms of an FTS5 expression as fts_expression builds it."""
    return [t.replace('""', '"') for t in _QUOTED.findall(match) if t.strip()]


def driving_terms(docs: dict[str, int], budget: int) -> list[str]:
    """The rarest terms that some fragment holds, as many as hold `budget` matches together,
    and at least the rarest one (ties in the query's order)."""
    held = sorted((t for t in docs if docs[t] > 0), key=docs.__getitem__)
    chosen: list[str] = []
    total = 0
    for term in held:
        if chosen and total + docs[term] > budget:
            break
        chosen.append(term)
        total += docs[term]
    return chosen


class Keywords(TermCounts):
    def keyword_search(self, match: str, limit: int) -> list[tuple[Fragment, float]]:
        """(fragment without text or parent, negated score) best first."""
        return self.keyword_search_tokens(match, limit)[0]

    def keyword_search_tokens(self, match: str, limit: int
                              ) -> tuple[list[tuple[Fragment, float]], dict[str, frozenset[str]]]:
        """keyword_search, and each match's fragment_tokens read along in the same round
        trip (the engine measures the query's coverage on the best of them)."""
        terms = fts_terms(match)
        docs = self.phrase_counts(terms)
        drive = driving_terms(docs, DRIVE_BUDGET)
        if not drive:
            return [], {}  # no fragment holds any term
        # One phrase query per driving term, OR-ed: the terms are parameters, never SQL.
        either = " || ".join(f"phraseto_tsquery('english', %(v{i})s)" for i in range(len(drive)))
        params = {"t": terms, "d": [float(docs.get(t, 0)) for t in terms], "s": self.space,
                  "k": limit, "n": self._row_count(),
                  **{f"v{i}": t for i, t in enumerate(drive)}}
        rows = self._all(_SEARCH.format(drive=either), params)
        return ([(row_to_fragment(r), -float(r[-1])) for r in rows],
                {r[0]: frozenset(r[-2]) for r in rows})

    def fragment_tokens(self, ids: Sequence[str]) -> dict[str, frozenset[str]]:
        """The distinct lexemes of each fragment's summary and content."""
        if not ids:
            return {}
        return {r[0]: frozenset(r[1]) for r in self._all(
            "SELECT id, tsvector_to_array(tsv) FROM fragment_words WHERE space = %s "
            "AND id = ANY(%s)", (self.space, list(ids)))}
