"""Corrections in a team space (issue 29, migration 4 in correct_sql.py): the record the
database keeps of every supersession, with the corrector and the original author, and the
undo any writing member may do. The SQLite store's `unsupersede` by the same name and
meaning, so the curator's undo works on a hub space too."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import InvalidInput, NotFound
from .connection import HubConnection

_COLUMNS = ("s.id, s.old_id, s.new_id, s.author, s.original_author, s.at, s.undone_by, "
            "s.undone_at, o.summary, n.summary")
_FROM = ("FROM supersessions s LEFT JOIN fragments o ON o.space = s.space AND o.id = s.old_id "
         "LEFT JOIN fragments n ON n.space = s.space AND n.id = s.new_id WHERE s.space = %s")


@dataclass(frozen=True)
class Correction:
    """One supersession in a team space, as the database recorded it."""

    id: int
    old_id: str
    new_id: str
    corrector: str
    original_author: str
    at: float
    undone_by: str | None
    undone_at: float | None
    old_summary: str | None  # None: that fragment is gone since
    new_summary: str | None

    @property
    def standing(self) -> bool:
        return self.undone_at is None


class Corrections(HubConnection):
    def unsupersede(self, old: str, new: str) -> bool:
        """Undoes `supersede(old, new)`; False when `old` is no longer superseded by `new`.
        The database marks the record undone, by this role (correct_sql.py)."""
        def work() -> bool:
            if not self._run("UPDATE fragments SET superseded_by = NULL WHERE space = %s AND "
                             "id = %s AND superseded_by = %s", (self.space, old, new)):
                return False
            self._run("DELETE FROM edges WHERE space = %s AND source = %s AND target = %s AND "
                      "kind = 'supersedes'", (self.space, new, old))
            return True
        return self._atomic(work)

    def corrections(self, of_author: str | None = None, by_others: bool = False,
                    limit: int = 50) -> list[Correction]:
        """The newest supersessions of the space; with `of_author`, only those of that role's
        facts, and with `by_others`, only those someone else made."""
        sql, params = f"SELECT {_COLUMNS} {_FROM}", [self.space]
        if of_author is not None:
            sql += " AND s.original_author = %s"
            params.append(of_author)
            if by_others:
                sql += " AND s.author <> s.original_author"
        return [Correction(int(r[0]), *r[1:]) for r in
                self._all(sql + " ORDER BY s.id DESC LIMIT %s", [*params, limit])]

    def correction(self, entry: int) -> Correction:
        rows = self._all(f"SELECT {_COLUMNS} {_FROM} AND s.id = %s", (self.space, entry))
        if not rows:
            raise NotFound(f"no correction {entry} in space '{self.space}'")
        return Correction(int(rows[0][0]), *rows[0][1:])

    def undo_correction(self, entry: int) -> Correction:
        """Makes the corrected fact live again (the correction stays, as a fact of its own:
        forget it if it is wrong). Any writing member may; once."""
        found = self.correction(entry)
        if not found.standing:
            raise InvalidInput(f"that correction was undone already, by {found.undone_by}")
        if not self.unsupersede(found.old_id, found.new_id):
            raise InvalidInput("that fact was changed since; the correction cannot be undone")
        return self.correction(entry)

    def older_versions(self, fid: str) -> list[str]:
        """The fragments `fid` superseded (the SQLite store's name and meaning)."""
        return [str(r[0]) for r in self._all(
            "SELECT id FROM fragments WHERE space = %s AND superseded_by = %s ORDER BY seq",
            (self.space, fid))]
