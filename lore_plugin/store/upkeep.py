"""Upkeep for `lore doctor` and forgetting: integrity checks, the FTS index, graph repair
(orphans, dangling pointers, cycles), the WAL, and making deleted text unrecoverable."""

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

    def extra_parents(self) -> list[str]:
        """Hierarchical edges into a fragment that has a newer one: a child has one parent
        (linking moves it), so only an old import could leave a second, and a walk then
        reaches the child twice."""
        return [r[0] for r in self.conn.execute(
            "SELECT e.id FROM edges e WHERE e.kind = 'hierarchical' AND EXISTS (SELECT 1 "
            "FROM edges g WHERE g.target = e.target AND g.kind = 'hierarchical' AND "
            "(g.created_at, g.rowid) > (e.created_at, e.rowid))")]

    def hierarchy_cycles(self) -> list[str]:
        """One hierarchical edge per cycle (A→B→C→A), whose removal breaks it. A depth-first
        walk from the shallowest fragments meets a cycle's edge back up last, so that is the
        edge named: C→A, not the topic's own A→B."""
        children: dict[str, list[tuple[str, str]]] = {}  # parents in order, shallowest first
        for eid, parent, child in self.conn.execute(
                "SELECT e.id, e.source, e.target FROM edges e JOIN fragments f "
                "ON f.id = e.source WHERE e.kind = 'hierarchical' "
                "ORDER BY f.depth, e.source, e.target"):
            children.setdefault(parent, []).append((child, eid))
        state: dict[str, bool] = {}  # False while on the walk's path, True once finished
        back: list[str] = []
        for start in children:
            if start in state:
                continue
            state[start] = False
            stack = [(start, iter(children[start]))]
            while stack:  # iterative: a deep tree must not hit Python's recursion limit
                node, todo = stack[-1]
                for child, eid in todo:
                    if child not in state:
                        state[child] = False
                        stack.append((child, iter(children.get(child, []))))
                        break
                    if state[child] is False:
                        back.append(eid)
                else:
                    state[node] = True
                    stack.pop()
        return back

    def supersession_links(self) -> dict[str, str]:
        """old -> newer for every superseded fragment."""
        return dict(self.conn.execute(
            "SELECT id, superseded_by FROM fragments WHERE superseded_by IS NOT NULL").fetchall())

    def supersession_cycles(self) -> list[str]:
        """One fragment per supersession cycle (A superseded by B, B by A): the newest, whose
        pointer cleared makes it the current version again."""
        points, born = {}, {}
        for fid, newer, created in self.conn.execute(
                "SELECT id, superseded_by, created_at FROM fragments "
                "WHERE superseded_by IS NOT NULL"):
            points[fid], born[fid] = newer, created
        walked: dict[str, str] = {}
        breakers = []
        for start in points:
            path, node = [], start
            while node in points and node not in walked:
                walked[node] = start
                path.append(node)
                node = points[node]
            if walked.get(node) == start and node in path:  # this walk closed a loop
                loop = path[path.index(node):]
                breakers.append(max(loop, key=lambda f: (born[f], f)))
        return breakers

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
