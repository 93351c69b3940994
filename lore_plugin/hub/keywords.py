"""Keyword search with PostgreSQL's full text search, fed into the same fusion as FTS5.

The caller builds an FTS5 expression (recall/terms.fts_expression: an OR of quoted terms);
here each quoted term becomes a phrase query over the `tsv` column (english stemming, as
FTS5's porter tokenizer stems). A match scores

    sum over the query's terms it holds of  idf(term) * ts_rank(tsv, term, 1)

idf being FTS5's own (recall/fusion.idf) from the term's document count in the space, and
ts_rank's normalisation 1 dividing by the log of the document length (the space's row
count, idf's N, is re-read at most once a minute, as are term_statistics' counts), with the summary
weighted A (1.0) and the content B (0.5), as FTS5's bm25(2.0, 1.0) weighs them. That is
BM25's shape (rare words count more, repeats saturate, long texts count less). Like FTS5's
bm25 the score is returned negated (lower is better), and fusion divides a query's scores
by the best of them, so both backends' keyword evidence lies in 0..1 before it is fused."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from ..core.types import Fragment
from ..store.rows import FRAGMENT_NUMBERS, row_to_fragment
from .connection import HubConnection

_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
ROWS_TTL = 60.0  # seconds a space's row count (idf's N) is reused: it moves slowly
# A term's document count moves as slowly, and counting it visits every row holding it (300
# ms a query at 100K): kept as long as N, for this many terms at most.
TERMS_KEPT = 5000
# One pass over the matches: each (term, fragment) with its rank, read once (MATERIALIZED),
# and each term's document count from the same rows. The count is a GROUP BY, not a window
# over the matches: the window sorted every match with its tsvector, which spilled to disk
# at 100K (an external merge of 7 MB for a 4-word query). Equal scores (the same text in
# several fragments) are ordered by id: which of them made the cut used to be the plan's.
_SEARCH = (
    "WITH w AS MATERIALIZED (SELECT t, phraseto_tsquery('english', t) AS q "
    "FROM unnest(%(t)s::text[]) AS t), "
    "m AS MATERIALIZED (SELECT w.t, f.id, ts_rank('{0.1, 0.2, 0.5, 1.0}', f.tsv, w.q, 1) AS r "
    "FROM w JOIN fragments f ON f.space = %(s)s AND f.tsv @@ w.q WHERE numnode(w.q) > 0), "
    "d AS (SELECT t, count(*)::float8 AS docs FROM m GROUP BY t), "
    "h AS (SELECT m.id, sum(greatest(ln((%(n)s::float8 - d.docs + 0.5) / (d.docs + 0.5)), "
    "1e-6) * m.r) AS score FROM m JOIN d ON d.t = m.t GROUP BY m.id ORDER BY score DESC, "
    "m.id LIMIT %(k)s) ")


def fts_terms(match: str) -> list[str]:
    """The quoted terms of an FTS5 expression as fts_expression builds it."""
    return [t.replace('""', '"') for t in _QUOTED.findall(match) if t.strip()]


class Keywords(HubConnection):
    def keyword_search(self, match: str, limit: int) -> list[tuple[Fragment, float]]:
        """(fragment without text or parent, negated score) best first."""
        return self.keyword_search_tokens(match, limit)[0]

    def keyword_search_tokens(self, match: str, limit: int
                              ) -> tuple[list[tuple[Fragment, float]], dict[str, frozenset[str]]]:
        """keyword_search, and each match's fragment_tokens read along in the same round
        trip (the engine measures the query's coverage on the best of them)."""
        terms = fts_terms(match)
        if not terms:
            return [], {}
        columns = ", ".join(f"f.{c}" if c not in ("''", "NULL") else c
                            for c in FRAGMENT_NUMBERS.split(", "))
        rows = self._all(
            _SEARCH + "SELECT " + columns + ", tsvector_to_array(f.tsv), h.score FROM h "
            "JOIN fragments f ON f.space = %(s)s AND f.id = h.id ORDER BY h.score DESC, h.id",
            {"t": terms, "s": self.space, "k": limit, "n": self._row_count()})
        return ([(row_to_fragment(r), -float(r[-1])) for r in rows],
                {r[0]: frozenset(r[-2]) for r in rows})

    def _row_count(self) -> int:
        """Fragments in the space, re-counted at most every ROWS_TTL seconds."""
        now = time.monotonic()
        known = getattr(self, "_rows", None)
        if known is None or now - known[1] > ROWS_TTL:
            known = (int(self._one("SELECT count(*) FROM fragments WHERE space = %s",
                                   (self.space,))), now)
            self._rows = known
        return int(known[0])

    def term_statistics(self, terms: Sequence[str]
                        ) -> tuple[int, dict[str, tuple[frozenset[str], int]]]:
        """(rows in the space, {term: (its lexemes, rows holding its rarest lexeme)})."""
        if not terms:
            return 0, {}
        now = time.monotonic()
        known: dict[str, tuple[float, frozenset[str], int]] = getattr(self, "_terms", {})
        if len(known) > TERMS_KEPT:
            known = {}
        self._terms = known
        asked = [t for t in dict.fromkeys(terms)
                 if t not in known or now - known[t][0] > ROWS_TTL]
        if asked:
            for t, lex, docs in self._all(
                    "WITH t AS (SELECT t, array(SELECT lexeme FROM unnest(to_tsvector("
                    "'english', t))) AS lex FROM unnest(%(t)s::text[]) AS t) "
                    "SELECT t.t, t.lex, (SELECT min((SELECT count(*) FROM fragments f WHERE "
                    "f.space = %(s)s AND f.tsv @@ quote_literal(x)::tsquery)) FROM "
                    "unnest(t.lex) AS x) FROM t", {"t": asked, "s": self.space}):
                known[t] = (now, frozenset(lex), int(docs or 0))
        return self._row_count(), {t: (known[t][1], known[t][2]) for t in terms
                                   if t in known and known[t][1]}

    def fragment_tokens(self, ids: Sequence[str]) -> dict[str, frozenset[str]]:
        """The distinct lexemes of each fragment's summary and content."""
        if not ids:
            return {}
        return {r[0]: frozenset(r[1]) for r in self._all(
            "SELECT id, tsvector_to_array(tsv) FROM fragments WHERE space = %s AND id = ANY(%s)",
            (self.space, list(ids)))}
