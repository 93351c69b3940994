"""What consolidation's decay phase reads and writes: every fragment's relevance inputs as
numbers (shaped for numpy), scores written back unless recall touched them meanwhile, and
associative edges weakened and pruned."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .connection import Connection

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any


class Decay(Connection):
    def relevance_table(self) -> list[tuple[Any, ...]]:
        """(rowid, importance, access_count, decay_rate, last_reinforced, created_at, depth,
        relevance_score) for every fragment: all numbers, so callers can build one array."""
        return self.conn.execute(
            "SELECT rowid, importance, access_count, decay_rate, last_reinforced, created_at, "
            "depth, relevance_score FROM fragments").fetchall()

    def creation_times(self) -> Iterator[tuple[int, float]]:
        """(rowid, created_at) of every fragment in rowid order, streamed: at 100K a list of
        whole rows cost the server a 36 MB peak for two numbers a row."""
        yield from self.conn.execute("SELECT rowid, created_at FROM fragments ORDER BY rowid")

    def set_relevance_if_unchanged(self, rows: Sequence[tuple[float, int, float, int]]) -> int:
        """(score, rowid, last_reinforced, access_count): a fragment recalled since the caller
        read it keeps the score that recall gave it. Returns how many were updated."""
        with self.write():
            before = self.conn.total_changes()
            self.conn.executemany(
                "UPDATE fragments SET relevance_score = ? WHERE rowid = ? "
                "AND last_reinforced = ? AND access_count = ?", rows)
            return self.conn.total_changes() - before

    def ids_by_rowid(self, rowids: Sequence[int]) -> dict[int, str]:
        rows = self._rows_in("SELECT rowid, id FROM fragments WHERE rowid IN (%s)",
                             [int(r) for r in rowids])
        return dict(rows)

    def decay_edges(self, kind: str, factor: float, prune_below: float) -> tuple[int, int]:
        with self.write():
            self.conn.execute("UPDATE edges SET weight = weight * ? WHERE kind = ?", (factor, kind))
            decayed = self.conn.changes()
            self.conn.execute("DELETE FROM edges WHERE kind = ? AND weight < ?", (kind, prune_below))
            pruned = self.conn.changes()
        return decayed, pruned

    def edge_decay_preview(self, factor: float, prune_below: float) -> tuple[int, int]:
        """(associative edges, how many a decay by `factor` would prune), without writing."""
        row = self.conn.execute(
            "SELECT count(*), sum(weight * ? < ?) FROM edges WHERE kind = 'associative'",
            (factor, prune_below)).fetchone()
        return int(row[0] or 0), int(row[1] or 0)

    def weakest_associative(self, factor: float, prune_below: float,
                            limit: int) -> list[tuple[str, str, float]]:
        """(source summary, target summary, weight) of edges a decay would prune."""
        return [tuple(r) for r in self.conn.execute(  # type: ignore[misc]
            "SELECT s.summary, t.summary, e.weight FROM edges e JOIN fragments s ON s.id = "
            "e.source JOIN fragments t ON t.id = e.target WHERE e.kind = 'associative' AND "
            "e.weight * ? < ? ORDER BY e.weight LIMIT ?", (factor, prune_below, limit))]
