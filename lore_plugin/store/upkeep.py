"""Upkeep for `lore doctor` and forgetting: integrity checks, the FTS index, graph repair,
the WAL, and making deleted text unrecoverable."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import apsw

from .vectors import Vectors

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any


class Upkeep(Vectors):
    def integrity_check(self) -> list[str]:
        return [r[0] for r in self.conn.execute("PRAGMA integrity_check")]

    def rebuild_fts(self) -> None:
        with self.write():
            self.conn.execute("INSERT INTO fragments_fts(fragments_fts) VALUES ('rebuild')")

    def fts_consistent(self) -> bool:
        try:
            self.conn.execute("INSERT INTO fragments_fts(fragments_fts, rank) VALUES ('integrity-check', 1)")
        except apsw.Error:
            return False
        return True

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """For maintenance code and tests that need an ad-hoc read; callers pass parameters."""
        return [tuple(r) for r in self.conn.execute(sql, params)]

    def orphan_edges(self) -> list[str]:
        """Edges whose end is gone (possible only if foreign keys were ever off)."""
        return [r[0] for r in self.conn.execute(
            "SELECT e.id FROM edges e WHERE NOT EXISTS (SELECT 1 FROM fragments f WHERE f.id = e.source) "
            "OR NOT EXISTS (SELECT 1 FROM fragments f WHERE f.id = e.target)")]

    def dangling_supersessions(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM fragments f WHERE superseded_by IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM fragments g WHERE g.id = f.superseded_by)")]

    def repair_graph(self, edge_ids: Sequence[str], fragment_ids: Sequence[str]) -> None:
        with self.write():
            self.conn.executemany("DELETE FROM edges WHERE id = ?", [(i,) for i in edge_ids])
            self.conn.executemany("UPDATE fragments SET superseded_by = NULL WHERE id = ?",
                                  [(i,) for i in fragment_ids])
            if fragment_ids:
                self.bump_vector_epoch()

    def wal_bytes(self) -> int:
        try:
            return Path(str(self.path) + "-wal").stat().st_size
        except OSError:
            return 0

    def checkpoint(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def secure_delete(self) -> None:
        """From now on, deleted content is overwritten with zeros, not left in free pages."""
        self.conn.execute("PRAGMA secure_delete=ON")

    def purge_deleted(self) -> None:
        """Merges FTS5 segments (dropping deleted tokens), rewrites the file and truncates the
        WAL, so forgotten text does not linger anywhere in the database files: free pages
        still hold older copies of rows updated before secure_delete was on (a relevance
        update by consolidation, say), and only a VACUUM drops them."""
        with self.write():
            self.conn.execute("INSERT INTO fragments_fts(fragments_fts) VALUES ('optimize')")
        self.checkpoint()
        self.conn.execute("VACUUM")
        self.checkpoint()
