"""Edges and the topic tree of one space: linking (one parent per child, the larger weight
kept), edges by fragment or kind, parents, ancestors, children, descendants and topics.
The same walks as store/hierarchy.py, bounded the same way against damaged graphs."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import InvalidInput
from ..core.types import Edge
from ..store.connection import new_id
from .connection import HubConnection
from .state import STATE_JOIN, state_of

EDGE_COLUMNS = "id, source, target, kind, weight, created_at"


class Tree(HubConnection):
    def link(self, source: str, target: str, kind: str, weight: float, now: float) -> None:
        """Idempotent: an existing edge of the same kind keeps the larger weight."""
        if source == target:
            raise InvalidInput("a fragment cannot be linked to itself")

        def work() -> None:
            if kind == "hierarchical":  # one parent only: re-linking a child moves it
                self._run("DELETE FROM edges WHERE space = %s AND target = %s AND "
                          "kind = 'hierarchical' AND source <> %s", (self.space, target, source))
            self._run(
                "INSERT INTO edges (space, id, source, target, kind, weight, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (space, source, target, kind) "
                "DO UPDATE SET weight = greatest(edges.weight, excluded.weight)",
                (self.space, new_id(), source, target, kind, weight, now))
        self._atomic(work)

    def edges_of(self, fid: str, kinds: Sequence[str] = ("associative", "temporal", "supersedes"),
                 ) -> list[Edge]:
        return [Edge(*r) for r in self._all(
            f"SELECT {EDGE_COLUMNS} FROM edges WHERE space = %s AND (source = %s OR "
            "target = %s) AND kind = ANY(%s) ORDER BY weight DESC",
            (self.space, fid, fid, list(kinds)))]

    def edges_touching(self, fids: Sequence[str], kinds: Sequence[str]) -> list[Edge]:
        if not fids:
            return []
        return [Edge(*r) for r in self._all(
            f"SELECT {EDGE_COLUMNS} FROM edges WHERE space = %(s)s AND kind = ANY(%(k)s) "
            "AND (source = ANY(%(f)s) OR target = ANY(%(f)s))",
            {"s": self.space, "k": list(kinds), "f": list(fids)})]

    def edges_by_kind(self, kind: str) -> list[Edge]:
        return [Edge(*r) for r in self._all(
            f"SELECT {EDGE_COLUMNS} FROM edges WHERE space = %s AND kind = %s",
            (self.space, kind))]

    # -- the hierarchy --------------------------------------------------------------------
    def parent_id(self, fid: str) -> str | None:
        return self._one("SELECT source FROM edges WHERE space = %s AND target = %s AND "
                         "kind = 'hierarchical' LIMIT 1", (self.space, fid))

    def parent_ids(self, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        return dict(self._all("SELECT target, source FROM edges WHERE space = %s AND "
                              "kind = 'hierarchical' AND target = ANY(%s)",
                              (self.space, list(ids))))

    def ancestors(self, fid: str) -> list[str]:
        """Parent first, topic last; in a loop, each fragment once and never `fid`."""
        rows = self._all(
            "WITH RECURSIVE up(id, n) AS (SELECT %(f)s::text COLLATE \"C\", 0 UNION "
            "SELECT e.source, up.n + 1 FROM edges e JOIN up ON e.target = up.id "
            "WHERE e.space = %(s)s AND e.kind = 'hierarchical' AND up.n < 32) "
            "SELECT id FROM up WHERE n > 0 ORDER BY n", {"f": fid, "s": self.space})
        return list(dict.fromkeys(r[0] for r in rows if r[0] != fid))

    def child_ids(self, fid: str, include_superseded: bool = False) -> list[str]:
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        return [r[0] for r in self._all(
            "SELECT e.target FROM edges e JOIN fragments f ON f.space = e.space AND "
            f"f.id = e.target WHERE e.space = %s AND e.source = %s AND "
            f"e.kind = 'hierarchical' {hide} ORDER BY f.created_at, f.seq", (self.space, fid))]

    def descendant_ids(self, fid: str, max_levels: int = 16,
                       include_superseded: bool = False) -> list[tuple[str, int]]:
        """(id, level below fid) breadth-first, fid excluded, each id at its nearest level."""
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        return [(r[0], r[1]) for r in self._all(
            "WITH RECURSIVE down(id, n) AS (SELECT %(f)s::text COLLATE \"C\", 0 UNION ALL "
            "SELECT e.target, down.n + 1 FROM edges e JOIN down ON e.source = down.id "
            "JOIN fragments f ON f.space = e.space AND f.id = e.target "
            "WHERE e.space = %(s)s AND e.kind = 'hierarchical' AND down.n < %(m)s "
            f"AND e.target <> %(f)s {hide}) "
            "SELECT id, min(n) FROM down WHERE n > 0 GROUP BY id ORDER BY 2, 1",
            {"f": fid, "s": self.space, "m": max_levels})]

    def descendants_at_depth(self, roots: Sequence[str], depth: int,
                             include_superseded: bool = False) -> list[tuple[str, str]]:
        """(root, descendant) for the descendants of each root that sit at `depth`."""
        if not roots:
            return []
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        return [(r[0], r[1]) for r in self._all(
            "WITH RECURSIVE down(root, id, n, levels) AS (SELECT id, id, 0, %(d)s - depth "
            "FROM fragments WHERE space = %(s)s AND id = ANY(%(r)s) UNION ALL "
            "SELECT down.root, e.target, down.n + 1, down.levels FROM edges e "
            "JOIN down ON e.source = down.id JOIN fragments f ON f.space = e.space AND "
            "f.id = e.target WHERE e.space = %(s)s AND e.kind = 'hierarchical' "
            f"AND down.n < least(down.levels, 16) AND e.target <> down.root {hide}) "
            "SELECT DISTINCT root, id FROM down WHERE n > 0 AND n = levels",
            {"d": depth, "s": self.space, "r": list(roots)})]

    def topic_ids(self, include_superseded: bool = False) -> list[str]:
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        return [r[0] for r in self._all(
            f"SELECT f.id FROM fragments f {STATE_JOIN} WHERE f.space = %s AND f.depth = 0 "
            f"{hide} ORDER BY {state_of('relevance_score')} DESC", (self.space,))]

    def topic_names(self, limit: int = 200, project: str | None | bool = False) -> list[str]:
        """store/hierarchy.py's read: with `project`, only that project's topics."""
        mine = "" if project is False else \
            "AND coalesce(nullif(nullif(f.project, ''), '/'), '') = %s "
        params = (self.space, limit) if project is False else (self.space, project or "", limit)
        return [r[0] for r in self._all(
            f"SELECT f.summary FROM fragments f {STATE_JOIN} WHERE f.space = %s AND "
            f"f.depth = 0 AND f.superseded_by IS NULL {mine}ORDER BY "
            f"{state_of('relevance_score')} DESC LIMIT %s", params)]

    def topics_named(self, name: str) -> list[tuple[str, str | None]]:
        """(id, project) of every live topic called `name` (case ignored), the oldest first:
        store/hierarchy.py's read."""
        return [(r[0], r[1]) for r in self._all(
            "SELECT id, project FROM fragments WHERE space = %s AND lower(summary) = lower(%s) "
            "AND depth = 0 AND superseded_by IS NULL ORDER BY created_at, seq",
            (self.space, name.strip()))]

    def descendant_counts(self, ids: Sequence[str]) -> dict[str, int]:
        if not ids:
            return {}
        return {r[0]: int(r[1]) for r in self._all(
            "WITH RECURSIVE down(root, id, n) AS (SELECT id, id, 0 FROM fragments "
            "WHERE space = %(s)s AND id = ANY(%(i)s) UNION ALL SELECT down.root, e.target, "
            "down.n + 1 FROM edges e JOIN down ON e.source = down.id JOIN fragments f ON "
            "f.space = e.space AND f.id = e.target WHERE e.space = %(s)s AND "
            "e.kind = 'hierarchical' AND f.superseded_by IS NULL AND down.n < 16 "
            "AND e.target <> down.root) SELECT root, count(DISTINCT id) - 1 FROM down "
            "GROUP BY root", {"s": self.space, "i": list(ids)})}

    def reparent_children(self, fid: str, new_parent: str | None, now: float) -> int:
        children = self.child_ids(fid, include_superseded=True)
        with self.write():
            for child in children:
                if new_parent is None:
                    self._run("DELETE FROM edges WHERE space = %s AND target = %s AND "
                              "kind = 'hierarchical'", (self.space, child))
                else:
                    self.link(new_parent, child, "hierarchical", 1.0, now)
        return len(children)
