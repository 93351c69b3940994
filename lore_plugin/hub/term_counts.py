"""How many fragments of the space hold each query term, and how many the space has: idf's
inputs, for the keyword search's ranking and for the coverage measure (term_statistics).

A lexeme's count is a sum kept by the database (lexeme_counts, words_sql.py), read through
an index; a phrase of several lexemes is counted in `fragment_words` (each fragment holding
its rarest lexeme is visited). Each is kept here for COUNTS_TTL seconds, for at most
TERMS_KEPT terms. The keyword thread and the query's own thread ask for the same terms at
about the same time: the second waits for the first's answer."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from .connection import HubConnection
from .errors import HubError

log = logging.getLogger(__name__)

# Seconds a term's count is reused: long enough for the keyword thread's count to serve the
# query's own term_statistics, short enough that ranking sees counts as they are (they are
# an index lookup now; they were kept a minute when each was a scan of its matches).
COUNTS_TTL = 1.0
ROWS_TTL = 60.0  # seconds the space's row count (idf's N) is reused: it moves slowly
TERMS_KEPT = 5000
# Per term: its lexemes (as the index holds them), the rows holding the phrase (the keyword
# search's document count) and the rows holding its rarest lexeme (term_statistics'). The
# lexemes' counts are sums in lexeme_counts (words_sql.py); only a phrase of several
# lexemes ("err_7731" is 'err' <-> '7731') is counted in its rows.
_COUNT = (
    "WITH t AS (SELECT t, phraseto_tsquery('english', t) AS q, array(SELECT lexeme FROM "
    "unnest(to_tsvector('english', t))) AS lex FROM unnest(%(t)s::text[]) AS t), "
    "n AS (SELECT lexeme, sum(change) AS docs, count(*) AS rows FROM lexeme_counts "
    "WHERE space = %(s)s AND lexeme IN (SELECT unnest(lex) FROM t) GROUP BY lexeme) "
    "SELECT t.t, t.lex, CASE WHEN numnode(t.q) = 0 THEN 0 "
    "WHEN numnode(t.q) = 1 AND cardinality(t.lex) = 1 THEN "
    "coalesce((SELECT n.docs FROM n WHERE n.lexeme = t.lex[1]), 0) "
    "ELSE (SELECT count(*) FROM fragment_words f WHERE f.space = %(s)s AND f.tsv @@ t.q) END, "
    "(SELECT min(coalesce(n.docs, 0)) FROM unnest(t.lex) AS x LEFT JOIN n ON n.lexeme = x), "
    "array(SELECT n.lexeme FROM n WHERE n.lexeme = ANY (t.lex) AND n.rows > %(f)s) FROM t")
# A lexeme summed from more rows than this is folded into one row (words_sql.py).
FOLD_FROM = 64


class TermCounts(HubConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._counting = threading.Lock()
        self._known: dict[str, tuple[float, frozenset[str], int, int]] = {}

    def _counts(self, terms: Sequence[str]) -> dict[str, tuple[frozenset[str], int, int]]:
        """{term: (its lexemes, rows holding the phrase, rows holding its rarest lexeme)}."""
        with self._counting:
            now = time.monotonic()
            if len(self._known) > TERMS_KEPT:
                self._known = {}
            asked = [t for t in dict.fromkeys(terms)
                     if t not in self._known or now - self._known[t][0] > COUNTS_TTL]
            fresh = {}
            many: set[str] = set()
            if asked:
                for t, lex, phrase, rarest, fold in self._all(
                        _COUNT, {"t": asked, "s": self.space, "f": FOLD_FROM}):
                    fresh[t] = (now, frozenset(lex), int(phrase), int(rarest or 0))
                    many.update(fold)
            if many and not self.in_transaction():  # a refusal would abort the caller's
                self._fold(sorted(many))
            # A term no fragment holds is asked again next time (it costs an index lookup):
            # kept, a fact stored meanwhile would not drive the search for COUNTS_TTL.
            self._known.update((t, c) for t, c in fresh.items() if c[2] > 0)
            return {t: c[1:] for t in terms if (c := fresh.get(t) or self._known.get(t))}

    def _fold(self, lexemes: list[str]) -> None:
        """Folds each lexeme's rows into one; the counts stay as they are, and a failure
        only leaves the rows for the next reader to fold."""
        try:
            self._run("SELECT lore_fold_lexemes(%s, %s)", (self.space, lexemes))
        except HubError as exc:
            log.info("lexeme counts not folded: %s", exc)

    def phrase_counts(self, terms: Sequence[str]) -> dict[str, int]:
        """{term: rows of the space holding it as the keyword search matches it}."""
        return {t: c[1] for t, c in self._counts(terms).items()} if terms else {}

    def term_statistics(self, terms: Sequence[str]
                        ) -> tuple[int, dict[str, tuple[frozenset[str], int]]]:
        """(rows in the space, {term: (its lexemes, rows holding its rarest lexeme)})."""
        if not terms:
            return 0, {}
        counts = self._counts(terms)
        return self._row_count(), {t: (c[0], c[2]) for t, c in counts.items() if c[0]}

    def _row_count(self) -> int:
        """Fragments in the space, re-counted at most every ROWS_TTL seconds."""
        now = time.monotonic()
        known = getattr(self, "_rows", None)
        if known is None or now - known[1] > ROWS_TTL:
            known = (int(self._one("SELECT count(*) FROM fragments WHERE space = %s",
                                   (self.space,))), now)
            self._rows = known
        return int(known[0])
