"""The topic tree: parents, ancestors, children and descendants (hierarchical edges), the
topics themselves, and moving children to a new parent.

Every walk is bounded, even on a damaged graph (an imported loop A→B→C→A, a child with two
parents): each recursive query has a level limit, never walks back into its start, and names
each fragment once. Upward, the walk also drops a fragment met again at the same level (UNION):
32 levels of two parents each would otherwise be 2^32 paths. Downward it keeps UNION ALL, which
costs half as much on the brief's and the query's path (measured at 100K fragments): import
refuses a second parent and `lore doctor --fix` removes one, so paths there are the fragments."""

from __future__ import annotations

from collections.abc import Sequence

from .edges import Edges

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any


class Hierarchy(Edges):
    def parent_id(self, fid: str) -> str | None:
        return self._one(
            "SELECT source FROM edges WHERE target = ? AND kind = 'hierarchical' LIMIT 1", (fid,))

    def parent_ids(self, ids: Sequence[str]) -> dict[str, str]:
        """child -> parent for those of `ids` that have one."""
        return dict(self._rows_in(
            "SELECT target, source FROM edges WHERE kind = 'hierarchical' AND target IN (%s)",
            ids))

    def ancestors(self, fid: str) -> list[str]:
        """Parent first, topic last; in a loop, each fragment once and never `fid`."""
        rows = self.conn.execute(
            "WITH RECURSIVE up(id, n) AS (SELECT ?, 0 UNION "
            "SELECT e.source, up.n + 1 FROM edges e JOIN up ON e.target = up.id "
            "WHERE e.kind = 'hierarchical' AND up.n < 32) SELECT id FROM up WHERE n > 0 ORDER BY n",
            (fid,)).fetchall()
        return list(dict.fromkeys(r[0] for r in rows if r[0] != fid))

    def child_ids(self, fid: str, include_superseded: bool = False) -> list[str]:
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        rows = self.conn.execute(
            "SELECT e.target FROM edges e JOIN fragments f ON f.id = e.target "
            f"WHERE e.source = ? AND e.kind = 'hierarchical' {hide} "
            "ORDER BY f.created_at, f.rowid", (fid,)).fetchall()
        return [r[0] for r in rows]

    def sibling_texts(self, parent_id: str | None, depth: int) -> list[tuple[str, str]]:
        """(summary, content) of the live fragments that one new at `depth` under
        `parent_id` would sit beside: the parent's children (child_ids), or the topics
        (topic_ids) for depth 0 without a parent; none otherwise. Only the two columns: the
        near-duplicate pre-check reads every sibling at every store (recall/storing.py)."""
        if parent_id:
            rows = self.conn.execute(
                "SELECT f.summary, f.content FROM edges e JOIN fragments f ON f.id = e.target "
                "WHERE e.source = ? AND e.kind = 'hierarchical' AND f.superseded_by IS NULL",
                (parent_id,))
        elif depth == 0:
            rows = self.conn.execute(
                "SELECT summary, content FROM fragments WHERE depth = 0 "
                "AND superseded_by IS NULL")
        else:
            return []
        return [(summary, content) for summary, content in rows]

    def descendant_ids(self, fid: str, max_levels: int = 16,
                       include_superseded: bool = False) -> list[tuple[str, int]]:
        """(id, level below fid) breadth-first, fid itself excluded, each id once at its
        nearest level (a loop would otherwise list it again every few levels)."""
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        rows = self.conn.execute(
            "WITH RECURSIVE down(id, n) AS (SELECT ?, 0 UNION ALL "
            "SELECT e.target, down.n + 1 FROM edges e JOIN down ON e.source = down.id "
            "JOIN fragments f ON f.id = e.target "
            f"WHERE e.kind = 'hierarchical' AND down.n < ? AND e.target != ?1 {hide}) "
            "SELECT id, min(n) FROM down WHERE n > 0 GROUP BY id ORDER BY 2",
            (fid, max_levels)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def descendants_at_depth(self, roots: Sequence[str], depth: int,
                             include_superseded: bool = False) -> list[tuple[str, str]]:
        """(root, descendant) for the descendants of each root that sit at `depth`, in one
        walk per IN_CHUNK roots (a walk per root cost 0.2 ms each in a query)."""
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        rows = self._rows_in(
            "WITH RECURSIVE down(root, id, n, levels) AS (SELECT id, id, 0, ? - depth "
            "FROM fragments WHERE id IN (%s) UNION ALL SELECT down.root, e.target, "
            "down.n + 1, down.levels FROM edges e JOIN down ON e.source = down.id "
            "JOIN fragments f ON f.id = e.target WHERE e.kind = 'hierarchical' "
            f"AND down.n < min(down.levels, 16) AND e.target != down.root {hide}) "
            "SELECT DISTINCT root, id FROM down WHERE n > 0 AND n = levels",
            roots, (depth,))
        return [(r[0], r[1]) for r in rows]

    def topic_ids(self, include_superseded: bool = False) -> list[str]:
        hide = "" if include_superseded else "AND superseded_by IS NULL"
        return [r[0] for r in self.conn.execute(
            f"SELECT id FROM fragments WHERE depth = 0 {hide} ORDER BY relevance_score DESC")]

    def descendant_counts(self, ids: Sequence[str]) -> dict[str, int]:
        """Live descendants under each given fragment, in one walk per IN_CHUNK roots."""
        rows = self._rows_in(
            "WITH RECURSIVE down(root, id, n) AS (SELECT id, id, 0 FROM fragments "
            "WHERE id IN (%s) UNION ALL SELECT down.root, e.target, down.n + 1 FROM edges e "
            "JOIN down ON e.source = down.id JOIN fragments f ON f.id = e.target "
            "WHERE e.kind = 'hierarchical' AND f.superseded_by IS NULL AND down.n < 16 "
            "AND e.target != down.root) "
            "SELECT root, count(DISTINCT id) - 1 FROM down GROUP BY root", ids)
        return {r[0]: r[1] for r in rows}

    def topic_totals(self, project: str | None) -> tuple[int, int]:
        """(live topics, live topics from `project`)."""
        row = self.conn.execute(
            "SELECT count(*), coalesce(sum(project IS ?), 0) FROM fragments "
            "WHERE depth = 0 AND superseded_by IS NULL", (project,)).fetchone()
        return int(row[0]), int(row[1]) if project else 0

    def topic_names(self, limit: int = 200, project: str | None | bool = False) -> list[str]:
        """The live topics' names, the most relevant first; with `project` (None: no
        project, as heading_projects.project_of reads "" and "/"), only that project's."""
        mine = "" if project is False else \
            "AND coalesce(nullif(nullif(project, ''), '/'), '') = ? "
        params = (limit,) if project is False else (project or "", limit)
        return [r[0] for r in self.conn.execute(
            "SELECT summary FROM fragments WHERE depth = 0 AND superseded_by IS NULL "
            f"{mine}ORDER BY relevance_score DESC LIMIT ?", params)]

    def topics_named(self, name: str) -> list[tuple[str, str | None]]:
        """(id, project) of every live topic called `name` (case ignored), the oldest first:
        projects may each hold a topic of the same name (capture/known.match_topic)."""
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT id, project FROM fragments WHERE lower(summary) = lower(?) AND depth = 0 "
            "AND superseded_by IS NULL ORDER BY created_at, rowid", (name.strip(),))]

    def child_activity(self) -> list[tuple[str, int, str, int, float, float]]:
        """(parent id, depth, metadata JSON, children, first and last time a child was
        attached) for every live fragment that has children. Edges are aggregated before the
        join: one pass over the edge index instead of a probe per fragment."""
        return [tuple(r) for r in self.conn.execute(  # type: ignore[misc]
            "SELECT a.source, p.depth, p.metadata, a.n, a.first, a.last FROM (SELECT source, "
            "count(*) AS n, min(created_at) AS first, max(created_at) AS last FROM edges "
            "WHERE kind = 'hierarchical' GROUP BY source) a JOIN fragments p ON p.id = a.source "
            "WHERE p.superseded_by IS NULL")]

    def parent_links(self) -> dict[str, str]:
        """child -> parent for every hierarchical edge: the whole tree's shape, for the import
        check that must see all of it to refuse a cycle (one read, not a walk per edge)."""
        return dict(self.conn.execute(
            "SELECT target, source FROM edges WHERE kind = 'hierarchical'").fetchall())

    def cut_hierarchy_within(self, ids: Sequence[str]) -> int:
        """Deletes the hierarchical edges that join two of `ids`. Forgetting a whole subtree
        does this first: deleting one by one moves each victim's children up to its parent,
        and in a damaged tree (a cycle) that parent can be the child itself."""
        inside = set(ids)
        cut = [(r[0],) for r in self._rows_in(
            "SELECT id, source FROM edges WHERE kind = 'hierarchical' AND target IN (%s)", ids)
            if r[1] in inside]
        with self.write():
            self.conn.executemany("DELETE FROM edges WHERE id = ?", cut)
        return len(cut)

    def reparent_children(self, fid: str, new_parent: str | None, now: float) -> int:
        children = self.child_ids(fid, include_superseded=True)
        with self.write():
            for child in children:
                if new_parent is None:
                    self.conn.execute("DELETE FROM edges WHERE target = ? AND kind = 'hierarchical'",
                                      (child,))
                else:
                    self.link(new_parent, child, "hierarchical", 1.0, now)
        return len(children)

    def knowledge_of(self, project: str | None, limit: int, scan: int = 500
                     ) -> list[tuple[Any, int, int]]:
        """The SessionStart brief's candidates: live facts and details (and concepts without
        live children, which are notes in themselves) of `project` or of no project, the
        most important first, each with (times recalled, times used) from recall_use. Only
        the `scan` most relevant fragments and `project`'s `scan` newest are read (both
        walks are index-only), so the cost does not grow with the memory: a full scan of a
        70K-fragment memory took about a second on a loaded machine, this 12-140 ms."""
        from .rows import FRAGMENT_COLUMNS, row_to_fragment

        columns = ", ".join(f"f.{c.strip()}" for c in FRAGMENT_COLUMNS.split(","))
        rows = self.conn.execute(
            f"SELECT {columns}, coalesce(u.returned, 0), coalesce(u.used, 0) FROM fragments f "
            "LEFT JOIN recall_use u ON u.fragment_id = f.id WHERE f.rowid IN ("
            "SELECT rowid FROM (SELECT rowid FROM fragments ORDER BY relevance_score DESC "
            "LIMIT :scan) UNION SELECT rowid FROM (SELECT rowid FROM fragments WHERE "
            "project = :project ORDER BY rowid DESC LIMIT :scan)) "
            "AND f.superseded_by IS NULL AND (f.project = :project OR f.project IS NULL) "
            "AND (f.depth >= 2 OR (f.depth = 1 AND NOT EXISTS (SELECT 1 FROM edges e "
            "JOIN fragments c ON c.id = e.target WHERE e.source = f.id AND "
            "e.kind = 'hierarchical' AND c.superseded_by IS NULL))) "
            "ORDER BY f.importance DESC, f.relevance_score DESC LIMIT :limit",
            {"project": project, "scan": scan, "limit": limit}).fetchall()
        return [(row_to_fragment(r[:18]), int(r[18]), int(r[19])) for r in rows]
