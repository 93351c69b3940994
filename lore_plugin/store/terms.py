"""Query terms as the keyword index sees them: their tokens, how many fragments hold them,
and the tokens of candidate fragments, so that fusion can weigh a keyword match by how much
of the query's IDF mass it holds (fusion.keyword_coverage)."""

from __future__ import annotations

import json

import apsw

from .connection import Connection

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence


class Terms(Connection):
    def _tokenize(self, text: str) -> list[str]:
        """The index's own tokenizer (porter over unicode61, see schema.py), so "releasing"
        and "released" are both "releas" here as in FTS5."""
        tokenizer = getattr(self, "_porter", None)
        if tokenizer is None:
            tokenizer = self._porter = self.conn.fts5_tokenizer("porter", ["unicode61"])
        return [t[2] for t in tokenizer(text.encode(), apsw.FTS5_TOKENIZE_DOCUMENT, None)
                if len(t) > 2]

    def term_statistics(self, terms: Sequence[str]
                        ) -> tuple[int, dict[str, tuple[frozenset[str], int]]]:
        """(rows in the keyword index, {term: (its tokens, rows that hold its rarest token)}).
        One lookup in the index's vocabulary; the row count comes from FTS5's averages record
        (its first varint), not from counting."""
        tokens = {term: frozenset(self._tokenize(term)) for term in terms}
        wanted = sorted({tok for toks in tokens.values() for tok in toks})
        if not wanted:
            return 0, {}
        # A temp table: it works on read-only connections and needs no migration.
        self.conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.lore_vocab "
                          "USING fts5vocab(main, fragments_fts, row)")
        docs = dict(self._rows_in("SELECT term, doc FROM temp.lore_vocab WHERE term IN (%s)",
                                  wanted))
        rows = _varint(self._one("SELECT block FROM fragments_fts_data WHERE id = 1") or b"")
        return rows, {term: (toks, min(docs.get(tok, 0) for tok in toks))
                      for term, toks in tokens.items() if toks}

    def fragment_tokens(self, ids: Sequence[str]) -> dict[str, frozenset[str]]:
        """The distinct tokens of each fragment's summary, content and cues (the words it
        may be asked for by: the per-prompt hook's keyword coverage counts them as its own),
        read as one JSON row (see keyword_search for why one row)."""
        found: dict[str, frozenset[str]] = {}
        for (blob,) in self._rows_in(
                "SELECT json_group_object(id, summary || ' ' || content || ' ' || cues) "
                "FROM fragments "
                "WHERE id IN (%s)", ids):
            for fid, text in json.loads(blob or "{}").items():
                found[fid] = frozenset(self._tokenize(text))
        return found


def _varint(blob: bytes) -> int:
    """The first SQLite varint of a blob: big-endian 7-bit groups, the ninth byte whole."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value
