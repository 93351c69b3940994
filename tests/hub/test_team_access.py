"""Team spaces enforced by PostgreSQL (issue 29): three real roles and a read-only member on
the session's real server. The outsider reads nothing and writes nothing of the space, through
the store and the memory engine (the tools' path) and through plain SQL on every table, COPY
and the functions the migration adds; a reader cannot write; a removed member loses access
at the next statement of a connection already open; a member cannot change the members; the
author of every row is the database's word, not the client's."""

from __future__ import annotations

import contextlib
import time

import psycopg
import pytest

from lore_plugin.core.errors import NotFound
from lore_plugin.core.relevance import MemoryState
from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore, UnknownSpace
from lore_plugin.hub.access import Team
from lore_plugin.hub.access_sql import OWN_ROWS, SHARED
from lore_plugin.hub.correct_sql import TABLE as CORRECTIONS
from lore_plugin.hub.cue_vectors_sql import TABLE as CUE_VECTORS
from lore_plugin.hub.errors import HubAccessDenied
from lore_plugin.hub.state_sql import TABLE as STATE
from lore_plugin.hub.words_sql import COUNTS
from lore_plugin.hub.words_sql import TABLE as WORDS
from lore_plugin.recall.memory import Memory
from tests.hub.team_roles import TeamHub, make_team

TABLES = (*SHARED, *OWN_ROWS, CORRECTIONS, STATE, WORDS, COUNTS, CUE_VECTORS, "spaces",
          "space_members")
FACT = "Deploys of the billing service go through the release train on Tuesdays."


@pytest.fixture()
def team(hub_url: str) -> TeamHub:
    return make_team(hub_url)


def _fill(store: HubStore) -> str:
    """A row in every table of the space, written by the store's own methods."""
    now = time.time()
    topic = store.insert(NewFragment(content="Billing deploys", summary="Billing deploys",
                                     depth=0), now)
    fact = store.insert(NewFragment(content=FACT + " Frozen from 2026-12-20 to 2026-12-31.",
                                    summary="Billing deploys ride the Tuesday train", depth=1,
                                    source_session="s-1", cues="billing release train"),
                         now, parent_id=topic)  # cues: a row of cue_vectors
    store.set_watermark("/t/one.jsonl", 100, now)
    store.record_failure("/t/two.jsonl", 0, 50, "boom", now, 60, 3)
    store.record_history([("/t/three.jsonl", 10)], now)
    store.set_meta("consolidated_at", "1")
    store.record_usage(now, "extract", None, "m", 10, 5, None)
    store.journal_add("forget", fact, "a label", {}, now)
    older, newer = (store.insert(NewFragment(content=f"Billing freeze {n}", summary=f"Freeze {n}",
                                             depth=1), now, parent_id=topic) for n in (1, 2))
    store.supersede(older, newer, now)  # a supersession: a row of the correction record
    return fact


def _census(team: TeamHub) -> dict[str, int]:
    """Rows of the team space in each table, as the admin (superuser) sees them."""
    with psycopg.connect(team.admin, autocommit=True) as su:
        counts = {t: su.execute(f"SELECT count(*) FROM {t} WHERE space = %s",  # noqa: S608
                                (team.space,)).fetchone()[0] for t in TABLES if t != "spaces"}
        counts["spaces"] = su.execute("SELECT count(*) FROM spaces WHERE name = %s",
                                      (team.space,)).fetchone()[0]
        counts["fingerprint"] = hash(su.execute(
            "SELECT string_agg(id || summary || content || coalesce(superseded_by, ''), '' "
            "ORDER BY id) FROM fragments WHERE space = %s", (team.space,)).fetchone()[0])
        counts["state"] = hash(su.execute(  # what recall, the cycle and usefulness write
            "SELECT string_agg(concat_ws(' ', id, access_count, decay_rate, last_accessed, "
            "last_reinforced, relevance_score, returned, used, ignored_streak), '' ORDER BY id) "
            "FROM fragment_state WHERE space = %s", (team.space,)).fetchone()[0])
    return counts


# One statement per table that would add a row to the team space: %s is the space.
INSERTS = {
    "fragments": "INSERT INTO fragments (space, id, content, summary, depth, created_at, "
                 "last_accessed, last_reinforced) VALUES (%s, 'f00d', 'x', 'x', 0, 1, 1, 1)",
    "edges": "INSERT INTO edges (space, id, source, target, kind, created_at) "
             "VALUES (%s, 'e1', 'a', 'b', 'associative', 1)",
    "fragment_dates": "INSERT INTO fragment_dates (space, fragment_id, first_day, last_day) "
                      "VALUES (%s, 'f00d', 1, 2)",
    "watermarks": "INSERT INTO watermarks (space, machine, file_path, last_processed) "
                  "VALUES (%s, 'm', '/x', 1)",
    "ingest_failures": "INSERT INTO ingest_failures (space, machine, file_path, start_offset, "
                       "end_offset, last_error, first_failed, next_retry) "
                       "VALUES (%s, 'm', '/x', 0, 1, 'e', 1, 1)",
    "history": "INSERT INTO history (space, machine, file_path, end_offset, recorded_at) "
               "VALUES (%s, 'm', '/x', 1, 1)",
    "meta": "INSERT INTO meta (space, key, value) VALUES (%s, 'k', 'v')",
    "llm_usage": "INSERT INTO llm_usage (space, machine, at, purpose, model, input_tokens, "
                 "output_tokens) VALUES (%s, 'm', 1, 'p', 'm', 1, 1)",
    "curation_journal": "INSERT INTO curation_journal (space, at, action, fragment_id, label) "
                        "VALUES (%s, 1, 'a', 'f', 'l')",
    WORDS: "INSERT INTO fragment_words (space, id, tsv) VALUES (%s, 'f00d', 'x')",
    COUNTS: "INSERT INTO lexeme_counts (space, lexeme, change) VALUES (%s, 'x', 1)",
    CORRECTIONS: "INSERT INTO supersessions (space, old_id, new_id) VALUES (%s, 'a', 'b')",
    CUE_VECTORS: "INSERT INTO cue_vectors (space, fragment_id) VALUES (%s, 'f00d')",
    STATE: "INSERT INTO fragment_state (space, id, decay_rate, last_accessed, last_reinforced, "
           "relevance_score) VALUES (%s, 'f00d', 0.1, 1, 1, 1)",
    "spaces": "INSERT INTO spaces (name, created_at) VALUES (%s, 1)",
    "space_members": "INSERT INTO space_members (space, role, level) "
                     "VALUES (%s, current_user::regrole, 'owner')",
}
UPDATES = {t: f"UPDATE {t} SET space = space WHERE space = %s"
           for t in (*SHARED, *OWN_ROWS, CORRECTIONS, STATE, WORDS, COUNTS, CUE_VECTORS)}
UPDATES[CUE_VECTORS] = ("UPDATE cue_vectors SET vectors = decode(repeat('00', 388), 'hex') "
                         "WHERE space = %s")
UPDATES[STATE] = "UPDATE fragment_state SET relevance_score = 9, returned = 9 WHERE space = %s"
UPDATES["spaces"] = "UPDATE spaces SET embed_model = 'other' WHERE name = %s"
UPDATES["space_members"] = "UPDATE space_members SET level = 'owner' WHERE space = %s"
DELETES = {t: f"DELETE FROM {t} WHERE space = %s"
           for t in (*SHARED, *OWN_ROWS, CORRECTIONS, STATE, WORDS, COUNTS, CUE_VECTORS,
                     "space_members")}
DELETES["spaces"] = "DELETE FROM spaces WHERE name = %s"


def _refused(conn: psycopg.Connection, sql: str, space: str, table: str) -> None:
    try:
        conn.execute(sql, (space,))
    except psycopg.Error:
        return
    pytest.fail(f"an insert into {table} of the space was accepted")


def _refused_or_nothing(conn: psycopg.Connection, sql: str, space: str) -> None:
    """The statement either fails (a policy, a privilege) or changes no row."""
    try:
        changed = conn.execute(sql, (space,)).rowcount
    except psycopg.Error:
        return
    assert changed == 0, sql


def test_every_table_with_a_space_forces_row_level_security_and_no_member_owns_one(
        team: TeamHub) -> None:
    with psycopg.connect(team.admin, autocommit=True) as su:
        rows = su.execute(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, r.rolsuper "
            "FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
            "WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace AND EXISTS ("
            "SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname IN "
            "('space', 'name') AND NOT a.attisdropped) AND c.relname <> 'lore_schema'"
        ).fetchall()
        definers = su.execute(
            "SELECT p.proname, p.proconfig FROM pg_proc p WHERE p.prosecdef AND "
            "p.pronamespace = 'public'::regnamespace").fetchall()
    assert {r[0] for r in rows} == set(TABLES)
    assert all(r[1] and r[2] and r[3] for r in rows), rows
    assert definers and all(any(c.startswith("search_path=") for c in (cfg or []))
                            for _, cfg in definers), definers


def test_the_outsider_reads_nothing_of_the_space_through_the_store_or_memory(
        team: TeamHub, embedder) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    Memory(owner, embedder).store(FACT, "Billing deploys ride the Tuesday train", depth=0)
    owner.close()
    with pytest.raises(UnknownSpace):
        HubStore(team.urls["outsider"], team.space)
    with pytest.raises(UnknownSpace, match="belongs to others"):
        HubStore(team.urls["outsider"], team.space, create_space=True)
    own = HubStore(team.urls["outsider"], "personal", create_space=True)
    memory = Memory(own, embedder)
    try:
        found = memory.query("how do billing deploys work?", depth=0, limit=10)
        assert own.space == f"personal.{team.roles['outsider']}"
        assert found.fragments == []
    finally:
        memory.close()
        own.close()


def test_the_outsider_reads_nothing_through_plain_sql(team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    fact = _fill(owner)
    owner.close()
    with psycopg.connect(team.admin, autocommit=True) as su:  # statistics to be hidden
        su.execute("ANALYZE fragments")
        assert su.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'fragments'"
                          ).fetchone()[0] > 0
    with team.sql("outsider") as sql:
        for table in TABLES:
            column = "name" if table == "spaces" else "space"
            assert sql.execute(f"SELECT count(*) FROM {table} WHERE {column} = %s",  # noqa: S608
                               (team.space,)).fetchone()[0] == 0, table
            assert sql.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table  # noqa: S608
        with sql.cursor() as cur, cur.copy("COPY fragments TO STDOUT") as copy:
            assert b"".join(bytes(block) for block in copy) == b""
        with sql.cursor() as cur, cur.copy("COPY (SELECT * FROM edges) TO STDOUT") as copy:
            assert b"".join(bytes(block) for block in copy) == b""
        owner_role = team.roles["owner"]
        assert sql.execute("SELECT lore_spaces('read', %s)", (owner_role,)).fetchone()[0] == []
        assert sql.execute("SELECT lore_spaces('own')").fetchone()[0] == []
        for trigger_function in ("lore_space_founder", "lore_stamp", "lore_space_claim"):
            with pytest.raises(psycopg.Error):
                sql.execute(f"SELECT {trigger_function}()")
        assert sql.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'fragments'"
                           ).fetchone()[0] == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no view of its own
            sql.execute("CREATE VIEW peek AS SELECT * FROM fragments")
    assert fact  # the rows were there to be seen


def test_the_outsider_writes_nothing_through_plain_sql(team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    _fill(owner)
    owner.close()
    before = _census(team)
    mine = HubStore(team.urls["outsider"], "personal", create_space=True)
    own_fragment = mine.insert(NewFragment(content="mine", summary="mine", depth=0), time.time())
    mine.close()
    with team.sql("outsider") as sql:
        # Folding a space's lexeme counts is for its readers: for anyone else, nothing.
        sql.execute("SELECT lore_fold_lexemes(%s, ARRAY['bill', 'deploy'])", (team.space,))
        for table, insert in INSERTS.items():
            _refused(sql, insert, team.space, table)
        for table in TABLES:
            _refused_or_nothing(sql, UPDATES[table], team.space)
            _refused_or_nothing(sql, DELETES[table], team.space)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # moving a row in
            sql.execute("UPDATE fragments SET space = %s WHERE id = %s", (team.space, own_fragment))
        with pytest.raises(psycopg.Error), sql.cursor() as cur, \
                cur.copy("COPY meta (space, key, value) FROM STDIN") as copy:
            copy.write_row((team.space, "k", "v"))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            sql.execute("TRUNCATE fragments CASCADE")
    assert _census(team) == before


def test_a_read_only_member_reads_but_cannot_write(team: TeamHub) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    fact = _fill(owner)
    before = _census(team)
    reader = HubStore(team.urls["reader"], team.space)
    try:
        assert reader.get(fact).summary == "Billing deploys ride the Tuesday train"
        with pytest.raises(HubAccessDenied, match=team.space):
            reader.insert(NewFragment(content="x", summary="x", depth=0), time.time())
        with pytest.raises(HubAccessDenied):
            reader.set_watermark("/t/r.jsonl", 5, time.time())
        with pytest.raises(HubAccessDenied):
            reader.set_meta("k", "v")
        # A reader's recall does not reinforce a team space, nor count its usefulness
        # (state_sql.py says why): the database filters the update, no error.
        reader.save_memory_states({fact: (MemoryState(9, 0.5, 9.0, 9.0), 9.0)})
        reader.record_recall_use([fact], [fact], time.time())
        assert reader.get(fact).access_count == 0 and reader.recall_use(fact) == (0, 0, 0)
        for change in (lambda: reader.update_text(fact, summary="rewritten by the reader"),
                       lambda: reader.delete(fact, time.time()),
                       lambda: reader.confirm([fact], time.time()),
                       lambda: reader.supersede(fact, fact[::-1], time.time())):
            with contextlib.suppress(HubAccessDenied):  # refused, or no row to change
                change()
    finally:
        reader.close()
    with team.sql("reader") as sql:
        for table, insert in INSERTS.items():
            _refused(sql, insert, team.space, table)
        for table in TABLES:
            _refused_or_nothing(sql, UPDATES[table], team.space)
            _refused_or_nothing(sql, DELETES[table], team.space)
    assert _census(team) == before
    assert owner.get(fact).confirmed_at is None
    owner.close()


def test_a_removed_member_loses_access_at_the_next_statement_of_an_open_connection(
        team: TeamHub, embedder) -> None:
    owner = HubStore(team.urls["owner"], team.space)
    owner_memory = Memory(owner, embedder)
    fact = owner_memory.store(FACT, "Billing deploys ride the Tuesday train", depth=0).id
    member = HubStore(team.urls["member"], team.space, pool_size=1)
    memory = Memory(member, embedder)
    plain = team.sql("member")
    try:
        assert [f.fragment.id for f in memory.query("billing deploys", depth=0).fragments] \
            == [fact]
        assert plain.execute("SELECT count(*) FROM fragments").fetchone()[0] >= 1
        with Team(team.urls["owner"]) as admin_of_space:
            assert admin_of_space.remove(team.roles["member"], team.space)
        assert memory.query("billing deploys", depth=0).fragments == []
        with pytest.raises(NotFound):
            member.get(fact)
        with pytest.raises(HubAccessDenied):
            memory.store("Another fact about billing.", "Another billing fact", depth=0)
        assert plain.execute("SELECT count(*) FROM fragments").fetchone()[0] == 0
        assert member.count_fragments() == 0
    finally:
        plain.close()
        for opened in (memory, owner_memory, member, owner):
            opened.close()


def test_a_member_cannot_add_members_or_change_levels(team: TeamHub) -> None:
    outsider, member = team.roles["outsider"], team.roles["member"]
    before = _census(team)
    with Team(team.urls["member"]) as mine:
        with pytest.raises(HubAccessDenied, match="not an owner"):
            mine.add(outsider, team.space)
        with pytest.raises(HubAccessDenied, match="not an owner"):
            mine.remove(team.roles["reader"], team.space)
        assert {m.role for m in mine.members(team.space)} == {
            team.roles["owner"], member, team.roles["reader"]}
    with team.sql("member") as sql:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            sql.execute("INSERT INTO space_members (space, role, level) VALUES "
                        "(%s, %s::regrole, 'member')", (team.space, outsider))
        assert sql.execute("UPDATE space_members SET level = 'owner' WHERE space = %s",
                           (team.space,)).rowcount == 0
        assert sql.execute("DELETE FROM space_members WHERE space = %s",
                           (team.space,)).rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the column is not theirs
            sql.execute("UPDATE spaces SET owner = current_user WHERE name = %s", (team.space,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # nor the definer's answer
            sql.execute("INSERT INTO space_members (space, role, level, added_by) VALUES "
                        "(%s, %s::regrole, 'owner', 'x')", (team.space, member))
    assert _census(team) == before
    with Team(team.urls["owner"]) as owner, pytest.raises(HubAccessDenied, match="stays"):
        owner.remove(team.roles["owner"], team.space)


def test_the_author_is_the_database_s_word_and_the_machine_is_recorded(team: TeamHub) -> None:
    member = HubStore(team.urls["member"], team.space, machine="laptop-2")
    fid = member.insert(NewFragment(content="x", summary="x", depth=0, source_session="s-9"),
                        time.time())
    member.close()
    with team.sql("member") as sql:
        sql.execute("INSERT INTO fragments (space, id, content, summary, depth, created_at, "
                    "last_accessed, last_reinforced, author, machine, authored_at) VALUES "
                    "(%s, 'forged', 'y', 'y', 0, 1, 1, 1, %s, 'elsewhere', 0)",
                    (team.space, team.roles["owner"]))
        sql.execute("UPDATE fragments SET author = %s, authored_at = 0 WHERE space = %s",
                    (team.roles["owner"], team.space))
        rows = dict((r[0], r[1:]) for r in sql.execute(
            "SELECT id, author, machine, source_session, authored_at FROM fragments "
            "WHERE space = %s", (team.space,)))
    assert rows[fid][:3] == (team.roles["member"], "laptop-2", "s-9")
    assert rows["forged"][0] == team.roles["member"] and rows["forged"][1] != "elsewhere"
    assert all(abs(r[3] - time.time()) < 60 for r in rows.values())


def test_a_personal_space_is_its_role_s_alone(team: TeamHub) -> None:
    mine = HubStore(team.urls["member"], "personal", create_space=True)
    assert mine.space == f"personal.{team.roles['member']}"
    mine.insert(NewFragment(content="private", summary="private", depth=0), time.time())
    mine.close()
    with Team(team.urls["member"]) as member, pytest.raises(HubAccessDenied):
        member.add(team.roles["owner"], mine.space)
    with pytest.raises(UnknownSpace):
        HubStore(team.urls["owner"], mine.space)
    with team.sql("outsider") as sql, pytest.raises(psycopg.errors.InsufficientPrivilege):
        sql.execute("INSERT INTO spaces (name, created_at) VALUES (%s, 1)",
                    (f"personal.{team.roles['reader']}",))
    with team.sql("owner") as sql:
        assert sql.execute("SELECT count(*) FROM fragments WHERE space = %s",
                           (mine.space,)).fetchone()[0] == 0
