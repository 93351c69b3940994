"""Forgetting in one hub space, by store/forgetting.py's names and meaning, under the rule of
migration 3 (forget_sql.py): a fragment of a team space may be deleted by its author or an
owner of the space only.

The consolidation cycle forgets as whoever runs it. Its choice here: it forgets only what
this role may delete, and never half of something. `forget_inputs` leaves out the fragments
the role may not delete, so the cycle never picks them (their author's or an owner's cycle
forgets them in time). `forget` deletes a live fragment together with the older versions it
superseded (deleting it alone would bring them back to life); when one of those is not this
role's to delete, it deletes none of them. In a personal space the role owns everything, so
this changes nothing there. The database still enforces the rule: a delete it filters rolls
the whole transaction back (fragments.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .fragments import Fragments
from .state import STATE_JOIN, joined

# Whether the current role may delete every fragment of the space: an owner, or the admin.
_DELETES_ALL = ("(%(s)s = ANY ((SELECT lore_spaces('own'))::text[]) OR "
                "coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false))")
_MAY_DELETE = f"(f.author = current_user OR {_DELETES_ALL})"


class Forgetting(Fragments):
    def forget_inputs(self, ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """id -> (depth, importance, access_count, decay_rate, last_reinforced, created_at)
        of those of `ids` this role may delete."""
        if not ids:
            return {}
        columns = joined("id, depth, importance, access_count, decay_rate, last_reinforced, "
                         "created_at")
        rows = self._all(
            f"SELECT {columns} "
            f"FROM fragments f {STATE_JOIN} WHERE f.space = %(s)s AND "
            f"f.id = ANY(%(i)s) AND {_MAY_DELETE}", {"s": self.space, "i": list(ids)})
        return {r[0]: tuple(r[1:]) for r in rows}

    def forget(self, fid: str, now: float) -> list[str]:
        """True forgetting of one fragment, in one transaction. Its children move to its
        parent. What it superseded never comes back to life: if it was itself superseded,
        those pointers move on to its replacement; if it was live, the older versions it
        replaced are forgotten with it, or, when this role may not delete all of them,
        nothing is. Topics are never deleted. Returns the deleted ids."""
        deleted: list[str] = []
        with self.write():
            rows = self._all("SELECT depth, superseded_by FROM fragments WHERE space = %s AND "
                             "id = %s FOR UPDATE", (self.space, fid))
            if not rows or rows[0][0] == 0:
                return deleted
            replacement = rows[0][1]
            if not self._may_delete_versions(fid, with_older=replacement is None):
                return deleted
            older = [r[0] for r in self._all(
                "SELECT id FROM fragments WHERE space = %s AND superseded_by = %s AND depth > 0",
                (self.space, fid))]
            if replacement is not None:
                for old in older:
                    if old != replacement:  # a cycle in bad data is simply cleared by delete
                        self._run("UPDATE fragments SET superseded_by = %s WHERE space = %s "
                                  "AND id = %s", (replacement, self.space, old))
                        self.link(replacement, old, "supersedes", 1.0, now)
                older = []
            self.delete(fid, now)
            deleted.append(fid)
            for old in older:
                deleted += self.forget(old, now)
        return deleted

    def _may_delete_versions(self, fid: str, with_older: bool) -> bool:
        """Whether this role may delete `fid` and, with_older, every older version it
        supersedes, transitively (what forget deletes with it)."""
        older = ("UNION SELECT f.id FROM fragments f JOIN chain c ON f.superseded_by = c.id "
                 "WHERE f.space = %(s)s AND f.depth > 0" if with_older else "")
        refused = self._one(
            f"WITH RECURSIVE chain(id) AS (SELECT %(f)s::text COLLATE \"C\" {older}) "
            "SELECT count(*) FROM fragments f JOIN chain c ON f.id = c.id WHERE "
            f"f.space = %(s)s AND NOT {_MAY_DELETE}", {"s": self.space, "f": fid})
        return not refused
