"""Forgetting a team fragment (issue 29, migration 3 in hub/forget_sql.py): only its author or
an owner of the space may delete it, through the store or through plain SQL, and every
deletion leaves a row in the space's curation journal naming the deleter's role, which a
member can neither rewrite nor delete."""

from __future__ import annotations

import time

import psycopg
import pytest

from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore
from lore_plugin.hub.errors import HubAccessDenied
from tests.hub.team_roles import TeamHub, make_team


@pytest.fixture()
def team(hub_url: str) -> TeamHub:
    return make_team(hub_url)


def _add(store: HubStore, summary: str, parent: str | None = None) -> str:
    return store.insert(NewFragment(content=summary + ".", summary=summary, depth=1),
                        time.time(), parent_id=parent)


def _deletions(team: TeamHub) -> list[tuple[str, str]]:
    """(fragment id, journal row's author) of every 'delete' entry, as the admin sees them."""
    with psycopg.connect(team.admin, autocommit=True) as su:
        return [(r[0], r[1]) for r in su.execute(
            "SELECT fragment_id, author FROM curation_journal WHERE space = %s "
            "AND action = 'delete' ORDER BY id", (team.space,))]


def _ids(team: TeamHub) -> set[str]:
    with psycopg.connect(team.admin, autocommit=True) as su:
        return {r[0] for r in su.execute("SELECT id FROM fragments WHERE space = %s",
                                         (team.space,))}


def test_a_member_cannot_delete_another_member_s_fragment(team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    topic = _add(owner, "Billing deploys")
    fact = _add(owner, "Billing deploys ride the Tuesday train", parent=topic)
    member = HubStore(team.urls["member"], team.space)
    try:
        with pytest.raises(HubAccessDenied, match="only its author or an owner"):
            member.delete(topic, time.time())
        assert member.parent_id(fact) == topic  # the child's move was rolled back too
        with team.sql("member") as sql:
            assert sql.execute("DELETE FROM fragments WHERE space = %s AND id = %s",
                               (team.space, fact)).rowcount == 0
            assert sql.execute("DELETE FROM fragments WHERE space = %s",
                               (team.space,)).rowcount == 0
    finally:
        member.close()
        owner.close()
    assert _ids(team) == {topic, fact}
    assert _deletions(team) == []


def test_the_author_and_an_owner_may_delete_and_each_deletion_is_journaled(
        team: TeamHub) -> None:
    member = HubStore(team.urls["member"], team.space)
    by_store, by_sql, by_owner = (_add(member, s) for s in ("Mine one", "Mine two", "Mine three"))
    kept = _add(member, "Mine four")
    owner = HubStore(team.urls["owner"], team.space)
    try:
        member.delete(by_store, time.time())
        with team.sql("member") as sql:
            assert sql.execute("DELETE FROM fragments WHERE space = %s AND id = %s",
                               (team.space, by_sql)).rowcount == 1
        owner.delete(by_owner, time.time())
        labels = [e["label"] for e in owner.journal() if e["action"] == "delete"]
    finally:
        owner.close()
        member.close()
    assert _ids(team) == {kept}
    roles = team.roles
    assert _deletions(team) == [(by_store, roles["member"]), (by_sql, roles["member"]),
                                (by_owner, roles["owner"])]
    assert labels[0] == f"deleted “Mine three” by {roles['owner']} (author: {roles['member']})"


def test_a_member_can_neither_rewrite_nor_delete_the_journal_of_a_deletion(
        team: TeamHub) -> None:
    member = HubStore(team.urls["member"], team.space)
    fid = _add(member, "Soon gone")
    member.delete(fid, time.time())
    member.close()
    with team.sql("member") as sql:
        sql.execute("UPDATE curation_journal SET label = 'nothing happened', action = 'edit', "
                    "fragment_id = 'x', author = 'nobody' WHERE space = %s", (team.space,))
        assert sql.execute("DELETE FROM curation_journal WHERE space = %s",
                           (team.space,)).rowcount == 0
        row = sql.execute("SELECT action, fragment_id, author, label FROM curation_journal "
                          "WHERE space = %s", (team.space,)).fetchone()
    assert row[:3] == ("delete", fid, team.roles["member"])
    assert row[3].startswith("deleted “Soon gone”")


def test_a_deletion_in_a_personal_space_is_not_journaled(team: TeamHub) -> None:
    mine = HubStore(team.urls["member"], "personal", create_space=True)
    try:
        mine.delete(_add(mine, "Private"), time.time())
        assert mine.journal() == []
    finally:
        mine.close()


def test_the_admin_can_still_drop_a_space_with_its_fragments(team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    _add(owner, "Goes with its space")
    owner.close()
    with psycopg.connect(team.admin, autocommit=True) as su:  # the cascade journals nothing
        assert su.execute("DELETE FROM spaces WHERE name = %s", (team.space,)).rowcount == 1
        assert su.execute("SELECT count(*) FROM curation_journal WHERE space = %s",
                          (team.space,)).fetchone()[0] == 0
