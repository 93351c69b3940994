"""One member correcting another's fact (issue 29, migration 4 in hub/correct_sql.py): the
correction supersedes the fact, the database records the corrector and the original author
whatever path made it, any writing member may undo it, and nobody can forge or erase the
record through plain SQL; a teammate's fact is corrected, never rewritten."""

from __future__ import annotations

import time

import psycopg
import pytest

from lore_plugin.core.errors import InvalidInput
from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore
from lore_plugin.hub.errors import HubAccessDenied
from tests.hub.team_roles import TeamHub, make_team

OLD = "Billing deploys ride the Tuesday train"
NEW = "Billing deploys ride the Thursday train since the freeze"


@pytest.fixture()
def team(hub_url: str) -> TeamHub:
    return make_team(hub_url)


def _fact(store: HubStore, summary: str) -> str:
    topic = store.find_by_summary("Billing", 0) or store.insert(
        NewFragment(content="Billing", summary="Billing", depth=0), time.time())
    return store.insert(NewFragment(content=summary + ".", summary=summary, depth=2),
                        time.time(), parent_id=topic)


def _records(team: TeamHub) -> list[tuple]:
    """(old, new, corrector, original author, undone by) of every record, as the admin."""
    with psycopg.connect(team.admin, autocommit=True) as su:
        return [tuple(r) for r in su.execute(
            "SELECT old_id, new_id, author, original_author, undone_by FROM supersessions "
            "WHERE space = %s ORDER BY id", (team.space,))]


def test_a_member_s_correction_of_the_owner_s_fact_records_both_authors(team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    member = HubStore(team.urls["member"], team.space)
    try:
        old = _fact(owner, OLD)
        new = _fact(member, NEW)
        member.supersede(old, new, time.time())
        assert owner.get(old).superseded_by == new
        seen = owner.corrections(of_author=team.roles["owner"], by_others=True)
        mine = member.corrections(of_author=team.roles["member"], by_others=True)
    finally:
        member.close()
        owner.close()
    roles = team.roles
    assert _records(team) == [(old, new, roles["member"], roles["owner"], None)]
    assert [(c.corrector, c.old_summary, c.new_summary, c.standing) for c in seen] == [
        (roles["member"], OLD, NEW, True)]
    assert mine == []  # the member's own facts were not corrected


def test_any_member_may_undo_a_correction_once_and_the_undo_is_recorded(team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    member = HubStore(team.urls["member"], team.space)
    try:
        old, new = _fact(member, OLD), _fact(owner, NEW)
        owner.supersede(old, new, time.time())
        entry = member.corrections(of_author=team.roles["member"])[0]
        undone = member.undo_correction(entry.id)
        assert undone.undone_by == team.roles["member"] and undone.undone_at is not None
        assert member.get(old).superseded_by is None
        assert member.edges_of(new, ("supersedes",)) == []
        with pytest.raises(InvalidInput, match="undone already"):
            owner.undo_correction(entry.id)
        # Superseded again, then undone through plain SQL: recorded all the same.
        member.supersede(old, new, time.time())
        with team.sql("owner") as sql:
            assert sql.execute("UPDATE fragments SET superseded_by = NULL WHERE space = %s "
                               "AND id = %s", (team.space, old)).rowcount == 1
    finally:
        member.close()
        owner.close()
    roles = team.roles
    assert _records(team) == [(old, new, roles["owner"], roles["member"], roles["member"]),
                              (old, new, roles["member"], roles["member"], roles["owner"])]


def test_a_reader_can_neither_correct_nor_undo_and_the_outsider_sees_no_record(
        team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    reader = HubStore(team.urls["reader"], team.space)
    try:
        old, new = _fact(owner, OLD), _fact(owner, NEW)
        other = _fact(owner, "Billing has a second fact")
        owner.supersede(old, new, time.time())
        entry = reader.corrections()[0]  # a reader reads the record
        with pytest.raises((HubAccessDenied, InvalidInput)):
            reader.undo_correction(entry.id)
        with pytest.raises(HubAccessDenied):
            reader.supersede(other, new, time.time())
    finally:
        reader.close()
        owner.close()
    with team.sql("reader") as sql:
        assert sql.execute("UPDATE fragments SET superseded_by = NULL WHERE space = %s",
                           (team.space,)).rowcount == 0
        with pytest.raises(psycopg.Error):
            sql.execute("INSERT INTO supersessions (space, old_id, new_id) VALUES (%s, %s, %s)",
                        (team.space, old, new))
    with team.sql("outsider") as sql:
        assert sql.execute("SELECT count(*) FROM supersessions").fetchone()[0] == 0
        assert sql.execute("UPDATE supersessions SET undone_at = 1").rowcount == 0
    assert [r[4] for r in _records(team)] == [None]
    owner = HubStore(team.urls["owner"], team.space)
    try:
        assert owner.get(old).superseded_by == new and owner.get(other).superseded_by is None
    finally:
        owner.close()


def test_a_member_cannot_forge_rewrite_or_erase_the_record_through_plain_sql(
        team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    try:
        old, new, live = _fact(owner, OLD), _fact(owner, NEW), _fact(owner, "Billing is live")
        owner.supersede(old, new, time.time())
    finally:
        owner.close()
    roles = team.roles
    with team.sql("member") as sql:
        with pytest.raises(psycopg.errors.CheckViolation):  # no such supersession stands
            sql.execute("INSERT INTO supersessions (space, old_id, new_id) VALUES (%s, %s, %s)",
                        (team.space, live, new))
        # A second record of the standing one: the database names who wrote what.
        sql.execute("INSERT INTO supersessions (space, old_id, new_id, author, original_author)"
                    " VALUES (%s, %s, %s, 'nobody', 'nobody')", (team.space, old, new))
        with pytest.raises(psycopg.errors.CheckViolation):  # it still stands
            sql.execute("UPDATE supersessions SET undone_at = 1, author = 'nobody', "
                        "original_author = 'nobody' WHERE space = %s", (team.space,))
        assert sql.execute("DELETE FROM supersessions WHERE space = %s",
                           (team.space,)).rowcount == 0
    assert _records(team) == [(old, new, roles["owner"], roles["owner"], None),
                              (old, new, roles["member"], roles["owner"], None)]
    with team.sql("owner") as sql:  # undone: both records say so, by the owner
        sql.execute("UPDATE fragments SET superseded_by = NULL WHERE space = %s AND id = %s",
                    (team.space, old))
    with team.sql("member") as sql:  # ...and stay as they are
        sql.execute("UPDATE supersessions SET author = 'nobody', original_author = 'nobody', "
                    "old_id = 'x', undone_by = 'nobody', undone_at = 1 WHERE space = %s",
                    (team.space,))
    assert _records(team) == [(old, new, roles["owner"], roles["owner"], roles["owner"]),
                              (old, new, roles["member"], roles["owner"], roles["owner"])]
    with team.sql("owner") as sql:  # an owner may clear the record, as the journal's
        assert sql.execute("DELETE FROM supersessions WHERE space = %s",
                           (team.space,)).rowcount == 2


def test_a_teammate_s_fact_is_corrected_not_rewritten(team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    member = HubStore(team.urls["member"], team.space)
    try:
        owners, members = _fact(owner, OLD), _fact(member, "Billing logs go to Loki")
        with pytest.raises(HubAccessDenied, match="correct it instead"):
            member.update_text(owners, summary="Billing deploys whenever")
        with team.sql("member") as sql, pytest.raises(psycopg.errors.InsufficientPrivilege):
            sql.execute("UPDATE fragments SET content = 'rewritten' WHERE space = %s AND id = %s",
                        (team.space, owners))
        member.update_text(members, summary="Billing logs go to Loki, 30 days")  # its own
        owner.update_text(members, content="Kept 30 days.")  # an owner may
        member.confirm([owners], time.time())  # every other column stays every member's
        assert owner.get(owners).summary == OLD and owner.get(owners).confirmed_at is not None
        assert owner.get(members).summary == "Billing logs go to Loki, 30 days"
        assert owner.get(members).content == "Kept 30 days."
    finally:
        member.close()
        owner.close()


def test_a_personal_space_keeps_no_record(team: TeamHub) -> None:
    mine = HubStore(team.urls["member"], "personal", create_space=True)
    try:
        old, new = _fact(mine, OLD), _fact(mine, NEW)
        mine.supersede(old, new, time.time())
        assert mine.corrections() == []
        assert mine.unsupersede(old, new) and mine.get(old).superseded_by is None
    finally:
        mine.close()
