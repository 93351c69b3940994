"""A hub space's cue vectors (migration 8, cue_vectors_sql.py), with the SQLite store's
method names and meaning: read for a prompt's candidates, the due ones listed for
recall/cue_vector_fill.py, and its results written back guarded by the cues they were made
from. Row-level security keeps every statement to the spaces the role may read or write;
`space = %s` keeps it to this one."""

from __future__ import annotations

from collections.abc import Sequence

from .connection import HubConnection
from .cue_vectors_sql import TABLE
from .upkeep import _WRITER

# The guard: only a row whose fragment's cues are the ones the blob was made from. A change
# of cues replaces the row (cue_vectors_sql.py), so a write racing it finds no row to change.
_GIVEN = "unnest(%(ids)s::text[], %(cues)s::text[], %(blobs)s::bytea[]) AS n(id, cues, blob)"
_GUARD = ("c.space = %(s)s AND c.fragment_id = n.id "
          "AND f.space = c.space AND f.id = c.fragment_id AND f.cues = n.cues")


class CueVectors(HubConnection):
    def cue_vectors(self, ids: Sequence[str]) -> dict[str, bytes]:
        """The vectors blob of each of these notes that has one (due or no cues: absent)."""
        if not ids:
            return {}
        rows = self._all(f"SELECT fragment_id, vectors FROM {TABLE} WHERE space = %s AND "
                         "fragment_id = ANY(%s) AND vectors IS NOT NULL",
                         (self.space, list(ids)))
        return {r[0]: bytes(r[1]) for r in rows}

    def cue_vectors_due_among(self, ids: Sequence[str]) -> list[str]:
        """Those of `ids` whose vectors are due: what a push may bring along (hub_sync.py),
        asked without reading any blob."""
        if not ids:
            return []
        return [r[0] for r in self._all(
            f"SELECT fragment_id FROM {TABLE} WHERE space = %s AND fragment_id = ANY(%s) "
            "AND vectors IS NULL", (self.space, list(ids)))]

    def cue_vectors_due(self, limit: int) -> list[tuple[str, str]]:
        """Up to `limit` (note id, its cues) whose vectors are due; none to a role that may
        not write them (a reader): it would embed them only to have the write refused."""
        rows = self._all(
            f"SELECT c.fragment_id, f.cues FROM {TABLE} c JOIN fragments f ON "
            "f.space = c.space AND f.id = c.fragment_id WHERE c.space = %(s)s AND "
            f"c.vectors IS NULL AND {_WRITER} ORDER BY c.fragment_id LIMIT %(k)s",
            {"s": self.space, "k": max(limit, 0)})
        return [(r[0], r[1]) for r in rows]

    def set_cue_vectors(self, rows: Sequence[tuple[str, str, bytes | None]]) -> int:
        """Stores each (id, the cues the blob was made from, blob); None: no vectors, and no
        longer due (the row goes). A row whose note's cues are no longer those is left as
        it is (due). Returns how many rows it stored or cleared."""
        filled = [(i, c, b) for i, c, b in rows if b is not None]
        cleared = [(i, c) for i, c, b in rows if b is None]

        def work() -> int:
            done = 0
            if filled:
                done += self._run(
                    f"UPDATE {TABLE} c SET vectors = n.blob FROM {_GIVEN}, fragments f "
                    f"WHERE {_GUARD}", {"s": self.space, "ids": [r[0] for r in filled],
                                        "cues": [r[1] for r in filled],
                                        "blobs": [r[2] for r in filled]})
            if cleared:
                done += self._run(
                    f"DELETE FROM {TABLE} c USING {_GIVEN}, fragments f WHERE {_GUARD}",
                    {"s": self.space, "ids": [r[0] for r in cleared],
                     "cues": [r[1] for r in cleared], "blobs": [None] * len(cleared)})
            return done
        return self._atomic(work)
