"""Keyword search: FTS5 with bm25, answered in one row of JSON."""

from __future__ import annotations

import json

import apsw

from .connection import Connection
from .rows import FRAGMENT_JSON, row_to_fragment

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from ..core.types import Fragment


class Keywords(Connection):
    def keyword_search(self, match: str, limit: int) -> list[tuple[Fragment, float]]:
        """(fragment without text or parent, bm25) best first, for an FTS5 MATCH expression
        built by the caller. A match in the cues (core/cues.py) counts as one in the
        content: they are the note's words for searching, never shown.

        It answers in one row of JSON. apsw gives up the GIL for every row it steps, and a
        thread that wants it back waits out the switch interval while another runs Python:
        beside a busy Python thread, a hundred rows stepped one by one took 280-370 ms, and
        the same rows as one JSON row 25 ms."""
        try:
            # Rank inside the index first: joining every match before sorting is 3x slower
            # when a common term matches thousands of rows.
            found = self._one(
                f"SELECT json_group_array(json_array({FRAGMENT_JSON}, x.r)) FROM "
                "(SELECT rowid, bm25(fragments_fts, 2.0, 1.0, 1.0) AS r FROM fragments_fts "
                "WHERE fragments_fts MATCH ? ORDER BY r LIMIT ?) AS x "
                "JOIN fragments f ON f.rowid = x.rowid", (match, limit))
        except apsw.SQLError:
            return []  # an expression FTS5 cannot parse finds nothing rather than failing
        ranked = sorted(json.loads(found or "[]"), key=lambda row: row[-1])  # bm25 is last
        return [(row_to_fragment(row), row[-1]) for row in ranked]
