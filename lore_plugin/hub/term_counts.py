"""How many fragments of the space hold each query term, and how many the space has: idf's
inputs, for the keyword search's ranking and for the coverage measure (term_statistics).

Counting a term visits every row of `fragment_words` holding it (20-60 ms for a term held
by 20K fragments, against 100-300 ms in `fragments`), and the counts move slowly, so each
is kept for COUNTS_TTL seconds, for at most TERMS_KEPT terms. The keyword thread and the
query's own thread ask for the same terms at about the same time: the second waits for the
first's count instead of counting again."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from .connection import HubConnection

COUNTS_TTL = 60.0  # seconds a count is reused
TERMS_KEPT = 5000
# Per term: its lexemes (as the index holds them), the rows holding the phrase (the keyword
# search's document count) and the rows holding its rarest lexeme (term_statistics'). A
# one-lexeme term's phrase is that lexeme: it is counted once.
_COUNT = (
    "WITH t AS (SELECT t, phraseto_tsquery('english', t) AS q, array(SELECT lexeme FROM "
    "unnest(to_tsvector('english', t))) AS lex FROM unnest(%(t)s::text[]) AS t) "
    "SELECT t.t, t.lex, CASE WHEN numnode(t.q) = 0 THEN 0 ELSE (SELECT count(*) FROM "
    "fragment_words f WHERE f.space = %(s)s AND f.tsv @@ t.q) END, "
    "CASE WHEN cardinality(t.lex) < 2 THEN NULL ELSE (SELECT min((SELECT count(*) FROM "
    "fragment_words f WHERE f.space = %(s)s AND f.tsv @@ quote_literal(x)::tsquery)) "
    "FROM unnest(t.lex) AS x) END FROM t")


class TermCounts(HubConnection):
    def _counts(self, terms: Sequence[str]) -> dict[str, tuple[frozenset[str], int, int]]:
        """{term: (its lexemes, rows holding the phrase, rows holding its rarest lexeme)}."""
        if not hasattr(self, "_counting"):
            self._counting = threading.Lock()
            self._known: dict[str, tuple[float, frozenset[str], int, int]] = {}
        with self._counting:
            now = time.monotonic()
            if len(self._known) > TERMS_KEPT:
                self._known = {}
            asked = [t for t in dict.fromkeys(terms)
                     if t not in self._known or now - self._known[t][0] > COUNTS_TTL]
            fresh = {}
            if asked:
                for t, lex, phrase, rarest in self._all(_COUNT, {"t": asked, "s": self.space}):
                    fresh[t] = (now, frozenset(lex), int(phrase),
                                int(phrase if rarest is None else rarest))
            # A term no fragment holds is asked again next time (it costs an index lookup):
            # kept, a fact stored meanwhile would stay unfindable by that word for a minute.
            self._known.update((t, c) for t, c in fresh.items() if c[2] > 0)
            return {t: c[1:] for t in terms if (c := fresh.get(t) or self._known.get(t))}

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
        """Fragments in the space, re-counted at most every COUNTS_TTL seconds."""
        now = time.monotonic()
        known = getattr(self, "_rows", None)
        if known is None or now - known[1] > COUNTS_TTL:
            known = (int(self._one("SELECT count(*) FROM fragments WHERE space = %s",
                                   (self.space,))), now)
            self._rows = known
        return int(known[0])
