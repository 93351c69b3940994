"""Edges between fragments: linking (one parent per child, the larger weight kept), reading
them by fragment or by kind, and the undirected associative links consolidation maintains."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import InvalidInput
from .connection import Connection, new_id

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from ..core.types import Edge


class Edges(Connection):
    def link(self, source: str, target: str, kind: str, weight: float, now: float) -> None:
        """Idempotent: an existing edge of the same kind keeps the larger weight."""
        if source == target:
            raise InvalidInput("a fragment cannot be linked to itself")
        with self.write():
            if kind == "hierarchical":
                # One parent only: re-linking a child moves it.
                self.conn.execute(
                    "DELETE FROM edges WHERE target = ? AND kind = 'hierarchical'", (target,))
            self.conn.execute(
                "INSERT INTO edges (id, source, target, kind, weight, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(source, target, kind) "
                "DO UPDATE SET weight = max(weight, excluded.weight)",
                (new_id(), source, target, kind, weight, now))

    def edges_of(self, fid: str, kinds: Sequence[str] = ("associative", "temporal", "supersedes"),
                 ) -> list[Edge]:
        from ..core.types import Edge
        marks = ",".join("?" * len(kinds))
        rows = self.conn.execute(
            f"SELECT id, source, target, kind, weight, created_at FROM edges "
            f"WHERE (source = ? OR target = ?) AND kind IN ({marks}) ORDER BY weight DESC",
            (fid, fid, *kinds)).fetchall()
        return [Edge(*r) for r in rows]

    def edges_touching(self, fids: Sequence[str], kinds: Sequence[str]) -> list[Edge]:
        """Edges of these kinds with either end among a few fragments (a query's hundred at
        most), in one statement."""
        from ..core.types import Edge
        if not fids:
            return []
        marks, kind_marks = ",".join("?" * len(fids)), ",".join("?" * len(kinds))
        return [Edge(*r) for r in self.conn.execute(
            f"SELECT id, source, target, kind, weight, created_at FROM edges "
            f"WHERE kind IN ({kind_marks}) AND (source IN ({marks}) OR target IN ({marks}))",
            (*kinds, *fids, *fids))]

    def edges_by_kind(self, kind: str) -> list[Edge]:
        from ..core.types import Edge
        return [Edge(*r) for r in self.conn.execute(
            "SELECT id, source, target, kind, weight, created_at FROM edges WHERE kind = ?",
            (kind,))]

    def associative_pairs(self) -> set[frozenset[str]]:
        return {frozenset(r) for r in self.conn.execute(
            "SELECT source, target FROM edges WHERE kind = 'associative'")}

    def upsert_associative(self, pairs: Sequence[tuple[str, str, float]], now: float) -> int:
        """Undirected associative edges: an edge in either direction keeps the larger weight,
        a missing one is created. Returns how many were new."""
        new = 0
        with self.write():
            for a, b, weight in pairs:
                self.conn.execute(
                    "UPDATE edges SET weight = max(weight, ?) WHERE kind = 'associative' AND "
                    "((source = ? AND target = ?) OR (source = ? AND target = ?))",
                    (weight, a, b, b, a))
                if not self.conn.changes():
                    self.link(a, b, "associative", weight, now)
                    new += 1
        return new
