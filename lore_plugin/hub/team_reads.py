"""What a team space shows its members (issue 29): the brief's candidates (the SQLite store's
`knowledge_of`, by the same name and meaning) and each fragment's author, the role the
database stamped on it at insert (access_sql.py), which no client can forge."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .connection import HubConnection
from .rows import COLUMNS, WIDTH, to_fragment
from .state import STATE_JOIN, joined, state_of

_SCAN = 500  # as store/hierarchy.py: the most important rows only, never the whole space


class TeamReads(HubConnection):
    def knowledge_of(self, project: str | None, limit: int, scan: int = _SCAN
                     ) -> list[tuple[Any, int, int]]:
        """Live facts and details (and concepts without live children) of `project` or of
        no project, most important first, each with (times recalled, times used), counted
        in fragment_state (state.py's record_recall_use)."""
        rows = self._all(
            f"SELECT {joined(COLUMNS)}, coalesce(s.returned, 0), coalesce(s.used, 0) "
            f"FROM fragments f {STATE_JOIN} WHERE f.space = %(s)s "
            "AND f.superseded_by IS NULL AND (f.project = %(p)s OR f.project IS NULL) "
            "AND (f.depth >= 2 OR (f.depth = 1 AND NOT EXISTS (SELECT 1 FROM edges e "
            "JOIN fragments c ON c.space = e.space AND c.id = e.target WHERE e.space = f.space "
            "AND e.source = f.id AND e.kind = 'hierarchical' AND c.superseded_by IS NULL))) "
            f"ORDER BY f.importance DESC, {state_of('relevance_score')} DESC LIMIT %(k)s",
            {"s": self.space, "p": project, "k": min(limit, scan)})
        return [(to_fragment(r), int(r[WIDTH]), int(r[WIDTH + 1])) for r in rows]

    def authors(self, ids: Sequence[str]) -> dict[str, str]:
        """The role that wrote each fragment (absent: no such fragment in the space)."""
        if not ids:
            return {}
        rows = self._all("SELECT id, author FROM fragments WHERE space = %s AND id = ANY(%s)",
                         (self.space, list(ids)))
        return {r[0]: str(r[1]) for r in rows}

    def role(self) -> str:
        """The role this client connects as."""
        return str(self._one("SELECT current_user"))

    def may_remove(self, fid: str) -> bool:
        """Whether this role may take a fragment out of the space (issue 29: its author, the
        space's owners, or the hub's admin): the rule the database enforces on delete
        (forget_sql.py), asked first so `lore unshare` refuses before it copies anything."""
        row = self._one(  # None: no such fragment
            "SELECT f.author = current_user OR EXISTS (SELECT 1 FROM space_members m WHERE "
            "m.space = f.space AND m.role = current_user::text::regrole AND m.level = 'owner') OR "
            "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) "
            "FROM fragments f WHERE f.space = %s AND f.id = %s", (self.space, fid))
        return bool(row)

    def authored(self, limit: int = 20, min_depth: int = 2) -> list[Any]:
        """This role's own live facts (and details) in the space, the newest first: what the
        viewer offers to take back out of it (`lore unshare`)."""
        rows = self._all(
            f"SELECT {joined(COLUMNS)} FROM fragments f {STATE_JOIN} WHERE "
            "f.space = %s AND f.author = current_user "
            "AND f.superseded_by IS NULL AND f.depth >= %s ORDER BY f.seq DESC LIMIT %s",
            (self.space, min_depth, limit))
        return [to_fragment(r) for r in rows]
