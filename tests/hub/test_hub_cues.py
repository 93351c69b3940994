"""Cues on the hub (issue 30, migration 7): kept beside each fragment, redacted, searched as
its words at the content's weight (the keyword table and each lexeme's count follow them),
carried by every copy between spaces, and an existing hub migrated without losing a row or a
keyword match."""

from __future__ import annotations

import os
import time

import psycopg
import pytest
from psycopg import conninfo

from lore_plugin.core.cues import CUES_CHARS, MAX_CUES
from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore, bootstrap, init_hub, term_counts
from lore_plugin.hub.schema import MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE
from lore_plugin.hub.words_sql import TABLE
from tests.hub.team_roles import make_team
from tests.hub.test_hub_keywords import _counts_agree, _found

SECRET = "ghp_" + "A1b2C3d4E5" * 4
CUES = "start backend on my machine\nlocal development server"


@pytest.fixture(autouse=True)
def _fresh_counts(monkeypatch):
    monkeypatch.setattr(term_counts, "COUNTS_TTL", 0.0)  # each count read from the database


def _note(store: HubStore, cues: str = CUES, **text: str) -> str:
    return store.insert(NewFragment(content=text.get("content", "To run atlas use make dev"),
                                    summary=text.get("summary", "Running atlas"), depth=2,
                                    cues=cues), time.time())


def test_a_note_is_found_by_a_cue_word_its_text_does_not_hold(hub_space):
    fid = _note(hub_space)
    other = _note(hub_space, cues="", content="the backend answers in JSON", summary="API")
    assert hub_space.get(fid).cues == CUES and hub_space.get(other).cues == ""
    assert _found(hub_space, '"machine"') == [fid]  # a cue word, in no note's text
    assert set(_found(hub_space, '"backend"')) == {fid, other}
    assert hub_space.phrase_counts(["machine", "development server"]) == {
        "machine": 1, "development server": 1}
    assert "machin" in hub_space.fragment_tokens([fid])[fid] and _counts_agree(hub_space)
    hub_space.update_text(fid, cues="deploy to staging")
    assert _found(hub_space, '"machine"') == [] and _found(hub_space, '"staging"') == [fid]
    assert _counts_agree(hub_space)
    hub_space.update_text(fid, summary="Running atlas locally")  # the cues stay
    assert hub_space.get(fid).cues == "deploy to staging" and _found(hub_space, '"staging"') == [fid]
    assert _counts_agree(hub_space)
    assert hub_space.get_many([fid])[fid].cues == "deploy to staging"
    hub_space._atomic(lambda: hub_space._run(  # any writer's statement, cues alone
        "UPDATE fragments SET cues = 'rollback plan' WHERE space = %s AND id = %s",
        (hub_space.space, fid)))
    assert _found(hub_space, '"staging"') == [] and _found(hub_space, '"rollback"') == [fid]
    assert _counts_agree(hub_space)
    assert hub_space.get_many([fid], with_text=False)[fid].summary == ""


def test_a_cue_weighs_as_the_content_does(hub_space):
    in_content = _note(hub_space, cues="", content="gateway retries", summary="Note")
    in_cues = _note(hub_space, cues="gateway", content="retries", summary="Note")
    in_summary = _note(hub_space, cues="", content="retries", summary="Note gateway")
    scores = dict((f.id, s) for f, s in hub_space.keyword_search('"gateway"', 10))
    assert scores[in_content] == pytest.approx(scores[in_cues])
    assert scores[in_summary] < scores[in_cues]  # negated: the summary (A) counts more


def test_a_secret_in_cues_never_reaches_the_row(hub_space):
    fid = _note(hub_space, cues=f"the token {SECRET}\nstaging login")
    updated = _note(hub_space, cues="")
    hub_space.update_text(updated, cues=f"login with {SECRET}")
    pushed = {**next(hub_space.export_fragments()), "id": "c0ffee" * 5,
              "cues": f"push token {SECRET}"}
    assert hub_space.insert_rows([pushed]) == (1, 0)
    raw = [r[0] for r in hub_space._all("SELECT cues FROM fragments WHERE space = %s",
                                        (hub_space.space,))]
    assert len(raw) == 3 and all("[REDACTED" in c and SECRET not in c for c in raw)
    assert "staging login" in hub_space.get(fid).cues
    assert _found(hub_space, '"A1b2C3d4E5"') == []


def test_copies_between_spaces_carry_cues_bounded_and_checked(hub_space, hub_url):
    fid = _note(hub_space)
    plain = _note(hub_space, cues="")
    rows = list(hub_space.export_fragments())
    assert {r["id"]: r["cues"] for r in rows} == {fid: CUES, plain: ""}
    many = {**rows[1], "id": "0a" * 16, "cues": [f"phrase {n} " + "x" * 200 for n in range(50)]}
    odd = {**rows[1], "id": "0b" * 16, "cues": 12345}
    old = {k: v for k, v in rows[1].items() if k != "cues"} | {"id": "0c" * 16}
    other = HubStore(hub_url, f"t{os.urandom(6).hex()}", create_space=True)
    try:
        assert other.insert_rows([*rows, many, odd, old]) == (5, 0)
        assert other.get(fid).cues == CUES and _found(other, '"machine"') == [fid]
        bounded = other.get("0a" * 16).cues
        assert len(bounded) <= CUES_CHARS and len(bounded.splitlines()) == MAX_CUES
        assert other.get("0b" * 16).cues == "" and other.get("0c" * 16).cues == ""
        assert _counts_agree(other)
    finally:
        other.close()


def test_team_reads_carry_cues_and_their_counts(hub_url):
    team = make_team(hub_url)
    member = HubStore(team.urls["member"], team.space)
    try:
        fid = _note(member)
        assert _found(member, '"machine"') == [fid]  # the member's insert indexed its cues
        member.record_recall_use([fid], [], time.time())
        member.record_recall_use([fid], [fid], time.time())
        [(frag, returned, used)] = member.knowledge_of(None, 10)
        assert (frag.id, frag.cues, returned, used) == (fid, CUES, 2, 1)
        assert [f.cues for f in member.authored()] == [CUES]
    finally:
        member.close()


def _hub_at(admin: str, version: int) -> str:
    """A new database with the hub's schema as migrations 1..version left it."""
    name = f"d{os.urandom(5).hex()}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = conninfo.make_conninfo(admin, dbname=name)
    with psycopg.connect(url, autocommit=True) as conn:
        bootstrap.ensure_pgvector(conn, url)
        conn.execute(f"CREATE TABLE {VERSION_TABLE} (version integer PRIMARY KEY, "
                     "applied_at double precision NOT NULL)")
        for n, sql in enumerate(MIGRATIONS[:version], start=1):
            with conn.transaction():
                conn.execute(sql)
                conn.execute(f"INSERT INTO {VERSION_TABLE} VALUES (%s, 0)", (n,))
    return url


WORDS = ["kafka", "consumer", "lag", "gateway", "retries", "invoices", "deploy", "argo"]


def _snapshot(url: str) -> tuple[list[tuple], dict[str, str], dict[str, int], dict[str, set]]:
    """Every row's text, every fragment's words, every lexeme's count, each word's matches."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT space, id, summary, content, depth, created_at FROM "
                            "fragments ORDER BY space, id").fetchall()
        words = dict(conn.execute(f"SELECT space || '/' || id, tsv::text FROM {TABLE}"))
        counts = dict(conn.execute("SELECT space || '/' || lexeme, sum(change) FROM "
                                   "lexeme_counts GROUP BY 1 HAVING sum(change) <> 0"))
        matches = {w: {r[0] for r in conn.execute(
            f"SELECT id FROM {TABLE} WHERE tsv @@ phraseto_tsquery('english', %s)", (w,))}
            for w in WORDS}
    return rows, words, counts, matches


def test_lore_hub_init_migrates_a_hub_keeping_every_row_and_keyword_match(hub_url):
    url = _hub_at(hub_url, 6)  # migration 7's test: from the schema before it
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO spaces (name, created_at) VALUES ('personal', 0), ('team', 0)")
        for n in range(60):
            conn.execute(
                "INSERT INTO fragments (space, id, content, summary, depth, created_at, "
                "last_accessed, last_reinforced) VALUES (%s, %s, %s, %s, 1, 0, 0, 0)",
                ("team" if n % 3 == 0 else "personal", f"{n:032x}",
                 f"the {WORDS[n % 8]} note {n} about {WORDS[(n * 5) % 8]}",
                 f"{WORDS[(n * 3) % 8].title()} {n}"))
    before = _snapshot(url)
    with psycopg.connect(url, autocommit=True) as conn:  # words a hand made stale: repaired
        conn.execute(f"UPDATE {TABLE} SET tsv = 'stale' WHERE id = %s", (f"{2:032x}",))
    assert init_hub(url) == SCHEMA_VERSION - 6
    assert _snapshot(url) == before  # every row, its words, the counts, the matches
    store = HubStore(url, "personal")
    try:
        assert store._one("SELECT count(*) FROM information_schema.columns WHERE "
                          "table_name = 'fragments' AND column_name = 'tsv'") == 0
        for word in WORDS:
            expected = {i for i in before[3][word] if int(i, 16) % 3}
            assert {f.id for f, _ in store.keyword_search(f'"{word}"', 100)} == expected
        assert all(f.cues == "" for f in store.get_many([r[1] for r in before[0]]).values())
        fid = f"{1:032x}"
        store.update_text(fid, cues="stream processing backlog")
        assert _found(store, '"backlog"') == [fid] and _counts_agree(store)
        assert init_hub(url) == 0  # running it again changes nothing
    finally:
        store.close()
