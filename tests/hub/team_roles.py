"""Real PostgreSQL roles for the team-space tests: an owner, a member, a read-only member
and an outsider, each connecting as itself to the session's hub (tests/conftest.py), and a
team space the owner created with the member and the reader in it."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psycopg
from psycopg.conninfo import make_conninfo

from lore_plugin.hub.access import Team

KINDS = ("owner", "member", "reader", "outsider")


@dataclass(frozen=True)
class TeamHub:
    admin: str  # the superuser's conninfo: the hub's admin
    roles: dict[str, str]  # kind -> role name
    urls: dict[str, str]  # kind -> conninfo as that role
    space: str  # the team space

    def sql(self, kind: str) -> psycopg.Connection:
        """A plain connection as one role, in autocommit."""
        return psycopg.connect(self.urls[kind], autocommit=True)


def make_roles(admin: str, *kinds: str) -> tuple[dict[str, str], dict[str, str]]:
    """Creates one LOGIN role per kind (fresh names: roles outlive a database)."""
    suffix = os.urandom(4).hex()
    roles = {kind: f"{kind}_{suffix}" for kind in kinds}
    with psycopg.connect(admin, autocommit=True) as su:
        for role in roles.values():  # hex suffix: a plain identifier
            su.execute(f"CREATE ROLE {role} LOGIN")
    return roles, {kind: make_conninfo(admin, user=role) for kind, role in roles.items()}


def make_team(admin: str) -> TeamHub:
    roles, urls = make_roles(admin, *KINDS)
    space = f"team-{roles['owner'].rsplit('_', 1)[1]}"
    with Team(urls["owner"]) as team:
        team.create(space)
        team.add(roles["member"], space)
        team.add(roles["reader"], space, "reader")
    return TeamHub(admin, roles, urls, space)
