"""Team spaces from the client's side (issue 29): the membership commands behind
`lore team`. The database enforces all of it (access_sql.py); this module only asks, and
turns the refusals into one clear line.

Everything here runs as the connected role, on one plain connection: an owner's change is
committed when the call returns, and takes effect at the next statement of every member."""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg

from .access_sql import LEVELS
from .bootstrap import connect, display
from .errors import HubAccessDenied, UnknownSpace
from .space_names import PERSONAL, SPACE_NAME, access_denied, check_visible, is_admin

# A role name Lore accepts on its command line: what PostgreSQL allows unquoted, which is
# also what fits into a personal space's name.
ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_$]{0,62}$")


@dataclass(frozen=True)
class Member:
    space: str
    role: str
    level: str  # owner / member / reader
    added_by: str


class Team:
    """`lore team` on one connection as the caller's role."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn = connect(url)
        self.role: str = self.conn.execute("SELECT current_user").fetchone()[0]  # type: ignore[index]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Team:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the refusals, each one line --------------------------------------------------------
    def _space_name(self, space: str) -> str:
        if not SPACE_NAME.match(space):
            raise UnknownSpace(f"'{space[:70]}' cannot name a space: use lower-case letters, "
                               "digits, '-', '_' or '.' (at most 63), starting with a letter "
                               "or digit")
        return space

    def _owned(self, space: str) -> str:
        self._space_name(space)
        level = self._level(space)
        if level is None:
            raise UnknownSpace(f"the hub at {display(self.url)} has no space '{space}' that "
                               f"role '{self.role}' can see")
        if level != "owner" and not is_admin(self.conn):
            raise HubAccessDenied(f"role '{self.role}' is not an owner of space '{space}' "
                                  f"(it is a {level}): only an owner changes its members")
        return space

    def _level(self, space: str) -> str | None:
        if self.conn.execute("SELECT 1 FROM spaces WHERE name = %s", (space,)).fetchone() is None:
            return None
        row = self.conn.execute(
            "SELECT m.level FROM space_members m JOIN pg_roles r ON r.oid = m.role "
            "WHERE m.space = %s AND r.rolname = current_user", (space,)).fetchone()
        return row[0] if row else "admin"

    def _role(self, role: str) -> str:
        if not ROLE_NAME.match(role):
            raise HubAccessDenied(f"'{role[:70]}' is not a role name Lore accepts: lower-case "
                                  "letters, digits and '_', starting with a letter or '_'")
        if self.conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                             (role,)).fetchone() is None:
            raise HubAccessDenied(f"role '{role}' does not exist on the hub at "
                                  f"{display(self.url)}: its admin creates it first "
                                  f"(CREATE ROLE {role} LOGIN ...)")
        return role

    # -- the commands -----------------------------------------------------------------------
    def create(self, space: str) -> bool:
        """Creates a team space owned by the caller; False when the caller already has it."""
        self._space_name(space)
        if space == PERSONAL or space.startswith(PERSONAL + "."):
            raise UnknownSpace(f"'{space}' names a personal space; a team space needs another "
                               "name")
        with self.conn.transaction():
            added = self.conn.execute(
                "INSERT INTO spaces (name, created_at) VALUES (%s, extract(epoch FROM now())) "
                "ON CONFLICT (name) DO NOTHING", (space,)).rowcount
        if not added:
            check_visible(self.conn, space, display(self.url))
        return bool(added)

    def add(self, role: str, space: str, level: str = "member") -> str:
        """Adds `role` to `space` at `level`, or changes its level; returns what was done."""
        if level not in LEVELS:
            raise HubAccessDenied(f"'{level}' is not a level: use one of {', '.join(LEVELS)}")
        self._owned(space)
        self._role(role)
        try:
            with self.conn.transaction():
                before = self.conn.execute(
                    "SELECT level FROM space_members m JOIN pg_roles r ON r.oid = m.role "
                    "WHERE m.space = %s AND r.rolname = %s", (space, role)).fetchone()
                self.conn.execute(
                    "INSERT INTO space_members (space, role, level) VALUES (%s, %s::regrole, %s) "
                    "ON CONFLICT (space, role) DO UPDATE SET level = excluded.level",
                    (space, _quoted(role), level))
        except psycopg.errors.InsufficientPrivilege as exc:
            raise access_denied(exc, space) from None
        if before is None:
            return f"added {role} to {space} as {level}"
        return f"{role} in {space}: {before[0]} -> {level}" if before[0] != level else \
            f"{role} already was a {level} of {space}"

    def remove(self, role: str, space: str) -> bool:
        """Removes `role` from `space`; False when it was not a member."""
        self._owned(space)
        self._role(role)
        try:
            with self.conn.transaction():
                gone = self.conn.execute(
                    "DELETE FROM space_members WHERE space = %s AND role = %s::regrole",
                    (space, _quoted(role))).rowcount
        except psycopg.errors.InsufficientPrivilege as exc:
            raise access_denied(exc, space) from None
        return bool(gone)

    def members(self, space: str | None = None) -> list[Member]:
        """The members of every space the caller can see, or of one."""
        if space is not None:
            self._space_name(space)
            if self._level(space) is None:
                raise UnknownSpace(f"the hub at {display(self.url)} has no space '{space}' "
                                   f"that role '{self.role}' can see")
        rows = self.conn.execute(
            "SELECT m.space, m.role::text, m.level, m.added_by FROM space_members m "
            "WHERE %(s)s::text IS NULL OR m.space = %(s)s "
            "ORDER BY m.space, array_position(%(l)s::text[], m.level), m.role::text",
            {"s": space, "l": list(LEVELS)}).fetchall()
        return [Member(*r) for r in rows]


def _quoted(role: str) -> str:
    """regrole's input is an identifier: ROLE_NAME's are plain, quoting keeps them exact."""
    return '"' + role.replace('"', '""') + '"'
