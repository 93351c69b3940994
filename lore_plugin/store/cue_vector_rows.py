"""The vectors of each fragment's cues (schemas 11-12, embedding/cue_vectors.py's blobs): read
for a prompt's few candidates, and the due rows recall/cue_vector_fill.py fills.

The triggers on fragments keep a row due (vectors NULL) from the moment cues are written or
changed; a fill writes a blob only while the fragment still has the cues it was made from,
so a change in between leaves the row due rather than serving vectors of old phrases."""

from __future__ import annotations

from .connection import Connection

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence

# The guard every write of a fill shares: the fragment's cues are still the ones embedded.
_SAME_CUES = "EXISTS (SELECT 1 FROM fragments WHERE id = ?1 AND cues = ?2)"


class CueVectorRows(Connection):
    def cue_vectors(self, ids: Sequence[str]) -> dict[str, bytes]:
        """id → blob, for those of `ids` whose cue vectors are filled."""
        return {row[0]: row[1] for row in self._rows_in(
            "SELECT fragment_id, vectors FROM cue_vectors WHERE fragment_id IN (%s) "
            "AND vectors IS NOT NULL", ids)}

    def cue_vectors_due(self, limit: int) -> list[tuple[str, str]]:
        """Up to `limit` (id, cues) whose vectors are due: read through the partial index,
        so nothing due costs nothing however large the table."""
        return [(row[0], row[1]) for row in self.conn.execute(
            "SELECT c.fragment_id, f.cues FROM cue_vectors c INDEXED BY idx_cue_vectors_due "
            "JOIN fragments f ON f.id = c.fragment_id WHERE c.vectors IS NULL LIMIT ?",
            (limit,))]

    def cue_vectors_due_count(self) -> int:
        return int(self._one("SELECT count(*) FROM cue_vectors INDEXED BY idx_cue_vectors_due "
                             "WHERE vectors IS NULL") or 0)

    def set_cue_vectors(self, rows: Sequence[tuple[str, str, bytes | None]]) -> int:
        """Stores each (id, the cues the blob was made from, blob) in one transaction, only
        where the fragment's cues are still those; None (cues without a phrase) removes the
        due row under the same guard. Returns how many rows it wrote."""
        with self.write():
            before = self.conn.total_changes()
            for fid, cues, blob in rows:
                if blob is None:
                    self.conn.execute(f"DELETE FROM cue_vectors WHERE fragment_id = ?1 AND "
                                      f"{_SAME_CUES}", (fid, cues))
                else:
                    self.conn.execute(f"UPDATE cue_vectors SET vectors = ?3 WHERE "
                                      f"fragment_id = ?1 AND {_SAME_CUES}", (fid, cues, blob))
            return int(self.conn.total_changes() - before)
