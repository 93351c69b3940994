"""Which space a name means for the connected role (issue 29), asked when a space is opened:
`personal` is each role's own, and a space of others is invisible to a non-member."""

from __future__ import annotations

import re

import psycopg

from .errors import HubAccessDenied, UnknownSpace

PERSONAL = "personal"
SPACE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")  # spaces.name's CHECK


def is_admin(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    return bool(row and row[0])


def resolve_space(conn: psycopg.Connection, space: str) -> str:
    """`personal` is stored as `personal.<role>` for each role, except for the admin (a
    superuser, who passes every policy anyway) whose `personal` keeps its name: one user's
    hub is unchanged, and two members' personal spaces never collide."""
    if space != PERSONAL or is_admin(conn):
        return space
    role = conn.execute("SELECT current_user").fetchone()[0]  # type: ignore[index]
    name = f"{PERSONAL}.{role}"
    if not SPACE_NAME.match(name):
        raise UnknownSpace(f"role '{role[:40]}' cannot have a personal space on the hub (its "
                           "name does not fit a space's name): set [hub] space to a team space")
    return name


def check_visible(conn: psycopg.Connection, space: str, where: str) -> None:
    """After `INSERT .. ON CONFLICT DO NOTHING`: a space of others stays invisible and the
    insert did nothing; say so now rather than fail at the first write."""
    if conn.execute("SELECT 1 FROM spaces WHERE name = %s", (space,)).fetchone() is None:
        raise UnknownSpace(f"space '{space}' on the hub at {where} belongs to others and this "
                           "role is not a member: ask its owner to run `lore team add <your "
                           f"role> --space {space}`")


def access_denied(exc: psycopg.Error, space: str) -> HubAccessDenied:
    """A refusal by the database (a row-level security policy, a missing privilege, one of
    the triggers) as one line naming the space."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return HubAccessDenied(f"the hub refused this role in space '{space}': {first}")
