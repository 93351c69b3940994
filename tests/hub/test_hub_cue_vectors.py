"""Cue vectors on the hub (issue 30, migration 8): the database keeps a note's row due from
the moment its cues are written or changed, drops it with the note, serves only vectors made
from the note's current cues, keeps them to the space, and an existing hub is migrated with
every note that has cues marked due."""

from __future__ import annotations

import time

import numpy as np
import psycopg
import pytest

from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.cue_vectors import closest, decode, encode
from lore_plugin.hub import HubStore, init_hub
from lore_plugin.hub.cue_vectors_sql import TABLE
from lore_plugin.hub.schema import SCHEMA_VERSION
from lore_plugin.recall.cue_vector_fill import fill_cue_vectors
from tests.hub.team_roles import make_team
from tests.hub.test_hub_cues import _hub_at

CUES = "start backend on my machine\nlocal development server"


def _note(store: HubStore, cues: str = CUES, text: str = "To run atlas use make dev") -> str:
    return store.insert(NewFragment(content=text, summary="Running atlas", depth=2, cues=cues),
                        time.time())


def _rows(store: HubStore) -> dict[str, bytes | None]:
    """The space's cue vector rows as the admin would see them: id -> blob (None: due)."""
    return {r[0]: None if r[1] is None else bytes(r[1]) for r in store._all(
        f"SELECT fragment_id, vectors FROM {TABLE} WHERE space = %s", (store.space,))}


def _blob(phrases: int = 2, seed: int = 0) -> bytes:
    vectors = np.random.default_rng(seed).normal(size=(phrases, 384)).astype(np.float32)
    return encode(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def test_a_note_written_with_cues_is_due_and_one_without_has_no_row(hub_space):
    with_cues, without = _note(hub_space), _note(hub_space, cues="")
    assert _rows(hub_space) == {with_cues: None}
    assert hub_space.cue_vectors_due(10) == [(with_cues, CUES)]
    assert hub_space.cue_vectors([with_cues, without]) == {}
    pushed = {**next(f for f in hub_space.export_fragments() if f["id"] == without),
              "id": "ab" * 16, "cues": "pushed phrase"}
    assert hub_space.insert_rows([pushed]) == (1, 0)  # the bulk path, per statement
    assert dict(hub_space.cue_vectors_due(10)) == {with_cues: CUES, "ab" * 16: "pushed phrase"}


def test_changing_cues_drops_the_vectors_and_makes_the_note_due_again(hub_space):
    fid = _note(hub_space)
    blob = _blob()
    assert hub_space.set_cue_vectors([(fid, CUES, blob)]) == 1
    assert hub_space.cue_vectors([fid]) == {fid: blob} and hub_space.cue_vectors_due(10) == []
    hub_space.update_text(fid, summary="Running atlas locally")  # cues untouched: kept
    hub_space.update_text(fid, cues=CUES)  # the same cues written again: kept
    assert hub_space.cue_vectors([fid]) == {fid: blob}
    hub_space.update_text(fid, cues="deploy to staging")
    assert hub_space.cue_vectors([fid]) == {} and hub_space.cue_vectors_due(10) == [
        (fid, "deploy to staging")]
    hub_space.update_text(fid, cues="")  # no cues: no row at all
    assert _rows(hub_space) == {}
    hub_space.update_text(fid, cues="rollback plan")
    assert _rows(hub_space) == {fid: None}
    hub_space.delete(fid, time.time())
    assert _rows(hub_space) == {}


def test_vectors_made_from_old_cues_are_refused_and_the_note_stays_due(hub_space):
    fid, other = _note(hub_space), _note(hub_space, cues="another phrase")
    hub_space.update_text(fid, cues="deploy to staging")
    assert hub_space.set_cue_vectors([(fid, CUES, _blob()), (other, "stale", None)]) == 0
    assert _rows(hub_space) == {fid: None, other: None}
    # None clears a due row under the same guard; vectors of the current cues replace.
    assert hub_space.set_cue_vectors([(other, "another phrase", None),
                                      (fid, "deploy to staging", _blob(1))]) == 2
    assert _rows(hub_space) == {fid: _blob(1)}
    assert hub_space.set_cue_vectors([(fid, "deploy to staging", _blob(1, seed=1))]) == 1
    assert _rows(hub_space) == {fid: _blob(1, seed=1)}
    with pytest.raises(psycopg.errors.CheckViolation):  # not a whole number of phrases
        hub_space._atomic(lambda: hub_space._run(
            f"UPDATE {TABLE} SET vectors = %s WHERE space = %s", (b"\x00" * 100, hub_space.space)))


def test_filling_embeds_every_phrase_of_every_due_note(hub_space, embedder):
    fid = _note(hub_space)
    plain = _note(hub_space, cues="")
    several = [_note(hub_space, cues=f"phrase {n} about queues\nsecond phrase {n}") for n in range(5)]
    assert fill_cue_vectors(hub_space, embedder, batch=2) == 6
    assert hub_space.cue_vectors_due(10) == []
    got = hub_space.cue_vectors([fid, plain, *several])
    assert set(got) == {fid, *several}
    assert decode(got[fid]).shape == (2, 384)
    for phrase in CUES.splitlines():
        assert closest(embedder.embed([phrase])[0], got[fid]) == pytest.approx(1.0, abs=0.01)
    assert closest(embedder.embed(["quarterly tax filing"])[0], got[fid]) < 0.5
    assert fill_cue_vectors(hub_space, embedder) == 0


def test_a_space_never_sees_another_s_cue_vectors(hub_url, hub_space, embedder):
    team = make_team(hub_url)
    owner, member, reader = (HubStore(team.urls[k], team.space) for k in
                             ("owner", "member", "reader"))
    outsider = HubStore(team.urls["outsider"], "personal", create_space=True)
    try:
        fid = _note(member)
        mine = _note(hub_space)  # same id space, another space of the hub
        assert owner.cue_vectors_due(10) == [(fid, CUES)]
        assert reader.cue_vectors_due(10) == []  # not the reader's to fill: nothing embedded
        assert reader.set_cue_vectors([(fid, CUES, _blob())]) == 0  # nor written
        assert fill_cue_vectors(reader, embedder) == 0
        assert fill_cue_vectors(member, embedder) == 1
        blob = member.cue_vectors([fid])[fid]
        assert owner.cue_vectors([fid]) == reader.cue_vectors([fid]) == {fid: blob}
        assert hub_space.cue_vectors([fid]) == {} and fid not in dict(hub_space.cue_vectors_due(9))
        assert member.cue_vectors([mine]) == {} and member.cue_vectors_due(9) == []
        assert outsider.cue_vectors([fid, mine]) == {} and outsider.cue_vectors_due(9) == []
        assert outsider.set_cue_vectors([(fid, CUES, None)]) == 0
        with team.sql("outsider") as sql:
            assert sql.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0] == 0
            assert sql.execute(f"DELETE FROM {TABLE}").rowcount == 0
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # only triggers add rows
                sql.execute(f"INSERT INTO {TABLE} (space, fragment_id) VALUES (%s, %s)",
                            (team.space, fid))
        with team.sql("member") as sql:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                sql.execute(f"INSERT INTO {TABLE} (space, fragment_id) VALUES (%s, %s)",
                            (team.space, fid))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no moving a row out
                sql.execute(f"UPDATE {TABLE} SET space = 'personal'")
        assert owner.cue_vectors([fid]) == {fid: blob}
    finally:
        for store in (owner, member, reader, outsider):
            store.close()


def test_migration_8_marks_every_note_with_cues_due_in_every_space(hub_url, embedder):
    url = _hub_at(hub_url, 7)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO spaces (name, created_at) VALUES ('personal', 0), ('team', 0)")
        for n in range(30):
            conn.execute(
                "INSERT INTO fragments (space, id, content, summary, depth, created_at, "
                "last_accessed, last_reinforced, cues) VALUES (%s, %s, %s, 'S', 2, 0, 0, 0, %s)",
                ("team" if n % 3 == 0 else "personal", f"{n:032x}", f"note {n}",
                 f"phrase {n}\nanother {n}" if n % 2 else ""))
        before = conn.execute("SELECT relfilenode FROM pg_class WHERE relname = 'fragments'"
                              ).fetchone()
    assert init_hub(url) == SCHEMA_VERSION - 7
    with psycopg.connect(url, autocommit=True) as conn:
        due = set(conn.execute(f"SELECT space, fragment_id FROM {TABLE} WHERE vectors IS NULL"))
        assert conn.execute("SELECT relfilenode FROM pg_class WHERE relname = 'fragments'"
                            ).fetchone() == before  # the fragments table was not rewritten
    assert due == {("team" if n % 3 == 0 else "personal", f"{n:032x}")
                   for n in range(30) if n % 2}
    store = HubStore(url, "team")
    try:
        assert fill_cue_vectors(store, embedder) == 5
        assert len(store.cue_vectors([f"{n:032x}" for n in range(30)])) == 5
        assert init_hub(url) == 0
    finally:
        store.close()
