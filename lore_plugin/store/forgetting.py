"""Forgetting: the inputs that decide what is forgotten, and true forgetting of a fragment in
one transaction."""

from __future__ import annotations

from collections.abc import Sequence

from .fragments import Fragments

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any


class Forgetting(Fragments):
    def forget_inputs(self, ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """id -> (depth, importance, access_count, decay_rate, last_reinforced, created_at)."""
        rows = self._rows_in("SELECT id, depth, importance, access_count, decay_rate, "
                             "last_reinforced, created_at FROM fragments WHERE id IN (%s)", ids)
        return {r[0]: tuple(r[1:]) for r in rows}

    def forget(self, fid: str, now: float) -> list[str]:
        """True forgetting of one fragment, in one transaction. Its children move to its
        parent. What it superseded never comes back to life: if it was itself superseded,
        those pointers move on to its replacement; if it was live, the older versions it
        replaced are forgotten with it. Topics are never deleted. Returns the deleted ids."""
        deleted: list[str] = []
        with self.write():
            row = self.conn.execute("SELECT depth, superseded_by FROM fragments WHERE id = ?",
                                    (fid,)).fetchone()
            if row is None or row[0] == 0:
                return deleted
            replacement = row[1]
            older = [r[0] for r in self.conn.execute(
                "SELECT id FROM fragments WHERE superseded_by = ? AND depth > 0", (fid,))]
            if replacement is not None:
                for old in older:
                    if old != replacement:  # a cycle in bad data is simply cleared by delete
                        self.conn.execute("UPDATE fragments SET superseded_by = ? WHERE id = ?",
                                          (replacement, old))
                        self.link(replacement, old, "supersedes", 1.0, now)
                older = []
            self.delete(fid, now)
            deleted.append(fid)
            for old in older:
                deleted += self.forget(old, now)
        return deleted
