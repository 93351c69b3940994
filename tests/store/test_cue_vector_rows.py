"""Cue vectors in the local store (schema 11, store/cue_vector_rows.py): the triggers keep a
note's vectors due whenever its cues change, a fill writes only vectors made from the cues
the note still has, and a filled blob holds one vector per phrase. Real SQLite files; the
real model for the fill."""

from __future__ import annotations

import json

import apsw
import numpy as np

from lore_plugin.core.config import Settings
from lore_plugin.core.cues import cue_list
from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.cue_vectors import closest, decode, encode
from lore_plugin.maintenance.importing import apply_import, plan_import
from lore_plugin.maintenance.operations import export
from lore_plugin.recall.cue_vector_fill import fill_cue_vectors
from lore_plugin.store import Store
from lore_plugin.store.schema import MIGRATIONS, SCHEMA_VERSION

CUES = "dashboard charting library choice\nwhich library draws the graphs\nplotting in the web app"
NOTE = NewFragment(content="The web app's dashboard draws its charts with Apache ECharts.",
                   summary="Charting library", depth=2, cues=CUES)
PLAIN = NewFragment(content="Deploys go out on Tuesdays.", summary="Deploy day", depth=2)
BLOB = encode(np.eye(3, 384, dtype=np.float32))  # any well-formed blob of three phrases


def due(store: Store) -> dict[str, str]:
    return dict(store.cue_vectors_due(100))


def rows(store: Store) -> dict[str, bytes | None]:
    return {r[0]: r[1] for r in store.conn.execute("SELECT fragment_id, vectors FROM cue_vectors")}


def test_a_note_inserted_with_cues_is_due_and_one_without_has_no_row(tmp_path):
    store = Store(tmp_path / "m.db")
    fid = store.insert(NOTE, now=1.0)
    plain = store.insert(PLAIN, now=1.0)
    assert due(store) == {fid: CUES}
    assert plain not in rows(store) and store.cue_vectors([fid, plain]) == {}
    store.close()


def test_changing_cues_drops_the_old_vectors_and_makes_the_note_due_again(tmp_path):
    store = Store(tmp_path / "m.db")
    fid = store.insert(NOTE, now=1.0)
    assert store.set_cue_vectors([(fid, CUES, BLOB)]) == 1
    assert store.cue_vectors([fid]) == {fid: BLOB} and due(store) == {}
    store.update_text(fid, cues=CUES)  # the same cues again: nothing to redo
    assert store.cue_vectors([fid]) == {fid: BLOB}
    store.update_text(fid, cues="echarts setup")
    assert store.cue_vectors([fid]) == {} and due(store) == {fid: "echarts setup"}
    store.close()


def test_cues_cleared_leave_no_row_and_a_deleted_note_leaves_none(tmp_path):
    store = Store(tmp_path / "m.db")
    cleared = store.insert(NOTE, now=1.0)
    gone = store.insert(NOTE, now=1.0)
    store.set_cue_vectors([(gone, CUES, BLOB)])
    store.update_text(cleared, cues="")
    assert cleared not in rows(store) and gone in rows(store)
    store.delete(gone, now=2.0)
    assert rows(store) == {}
    store.close()


def test_a_fill_for_cues_that_changed_meanwhile_writes_nothing_and_the_note_stays_due(tmp_path):
    store = Store(tmp_path / "m.db")
    fid = store.insert(NOTE, now=1.0)
    read = store.cue_vectors_due(10)  # the fill reads (id, cues) and embeds them...
    store.update_text(fid, cues="echarts setup")  # ...while another writer changes the cues
    assert store.set_cue_vectors([(i, c, BLOB) for i, c in read]) == 0
    assert store.set_cue_vectors([(i, c, None) for i, c in read]) == 0  # nor drops the due row
    assert store.cue_vectors([fid]) == {} and due(store) == {fid: "echarts setup"}
    store.close()


def test_cues_without_a_phrase_are_no_longer_due_once_a_fill_says_so(tmp_path):
    store = Store(tmp_path / "m.db")
    fid = store.insert(NOTE, now=1.0)
    assert store.set_cue_vectors([(fid, CUES, None)]) == 1
    assert rows(store) == {} and store.cue_vectors_due_count() == 0
    store.close()


def test_a_fill_gives_each_note_one_vector_per_phrase_and_each_phrase_finds_itself(
        tmp_path, embedder):
    store = Store(tmp_path / "m.db")
    ids = [store.insert(NOTE, now=1.0) for _ in range(5)]
    other = store.insert(NewFragment(content="Postgres 16 in production.", summary="DB",
                                     depth=2, cues="which database version"), now=1.0)
    superseded = store.insert(NOTE, now=1.0)
    store.supersede(superseded, ids[0], now=2.0)
    assert fill_cue_vectors(store, embedder, batch=2) == 7  # several passes, superseded too
    assert due(store) == {}
    blobs = store.cue_vectors([*ids, other, superseded])
    assert set(blobs) == {*ids, other, superseded}
    assert decode(blobs[ids[0]]).shape == (3, 384) and decode(blobs[other]).shape == (1, 384)
    for phrase in cue_list(CUES):
        own = embedder.embed([phrase])[0]
        assert closest(own, blobs[ids[1]]) > 0.98
        assert closest(own, blobs[other]) < 0.6
    assert fill_cue_vectors(store, embedder) == 0  # nothing due: nothing embedded
    store.close()


def test_reading_cue_vectors_of_many_ids_is_chunked(tmp_path):
    store = Store(tmp_path / "m.db")
    ids = [store.insert(NOTE, now=1.0) for _ in range(3)]
    store.set_cue_vectors([(i, CUES, BLOB) for i in ids])
    asked = [f"{n:032x}" for n in range(1200)] + ids  # past IN_CHUNK twice
    assert store.cue_vectors(asked) == dict.fromkeys(ids, BLOB)
    store.close()


def make_version_10_database(path) -> tuple[list[str], list[str]]:
    """A database as schema 10 left it: cues on some fragments, no cue vectors."""
    conn = apsw.Connection(str(path))
    for version, sql in enumerate(MIGRATIONS[:10], start=1):
        conn.execute(sql)
        conn.execute(f"PRAGMA user_version={version}")
    with_cues, without = [], []
    for i in range(30):
        fid = f"{i:032x}"
        (with_cues if i % 3 == 0 else without).append(fid)
        conn.execute("INSERT INTO fragments (id, content, summary, depth, created_at, "
                     "last_accessed, last_reinforced, cues) VALUES (?, ?, ?, 2, 1, 1, 1, ?)",
                     (fid, f"Service {i} listens on port {9000 + i}.", f"Port of service {i}",
                      f"port of service {i}\nwhere service {i} listens" if i % 3 == 0 else ""))
    conn.close()
    return with_cues, without


def test_the_migration_from_schema_10_marks_every_note_with_cues_due(tmp_path):
    path = tmp_path / "old.db"
    with_cues, _ = make_version_10_database(path)
    store = Store(path)
    try:
        assert store.user_version() == SCHEMA_VERSION == 12
        assert sorted(due(store)) == with_cues and len(rows(store)) == 10
        plan = store.conn.execute("EXPLAIN QUERY PLAN SELECT c.fragment_id, f.cues FROM "
                                  "cue_vectors c INDEXED BY idx_cue_vectors_due JOIN fragments f "
                                  "ON f.id = c.fragment_id WHERE c.vectors IS NULL").fetchall()
        assert "idx_cue_vectors_due" in str(plan)
    finally:
        store.close()


def test_imported_notes_with_cues_become_due_and_no_vectors_are_exported(tmp_path, embedder):
    settings = Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home")
    store = Store(settings.db_path)
    fid = store.insert(NOTE, now=1.0)
    plain = store.insert(PLAIN, now=1.0)
    fill_cue_vectors(store, embedder)
    assert set(store.cue_vectors([fid])) == {fid}
    store.close()
    backup = tmp_path / "backup.jsonl"
    export(settings, backup)
    records = [json.loads(line) for line in backup.read_text().splitlines()]
    assert records and all("cue_vectors" not in r and "cue_vectors" not in r.get("fragment", {})
                           for r in records)  # derived data: never exported
    other = Settings(db_path=tmp_path / "other.db", home=tmp_path / "h2")
    apply_import(other, plan_import(other, backup))
    copy = Store(other.db_path)
    try:
        assert due(copy) == {fid: CUES} and plain not in rows(copy)
        assert fill_cue_vectors(copy, embedder) == 1 and set(copy.cue_vectors([fid])) == {fid}
    finally:
        copy.close()


def test_a_schema_11_table_becomes_a_rowid_table_keeping_its_rows_and_triggers(tmp_path):
    path = tmp_path / "eleven.db"
    with_cues, _ = make_version_10_database(path)
    conn = apsw.Connection(str(path))
    conn.execute(MIGRATIONS[10])  # 11: WITHOUT ROWID, every note with cues due
    conn.execute("PRAGMA user_version=11")
    conn.execute("UPDATE cue_vectors SET vectors = ? WHERE fragment_id = ?", (BLOB, with_cues[0]))
    conn.close()
    store = Store(path)
    try:
        sql = store._one("SELECT sql FROM sqlite_master WHERE name = 'cue_vectors'")
        assert "WITHOUT ROWID" not in sql.upper()
        assert store.cue_vectors(with_cues) == {with_cues[0]: BLOB}
        assert sorted(due(store)) == with_cues[1:]
        store.update_text(with_cues[0], cues="another phrase")  # the triggers came along
        assert store.cue_vectors(with_cues) == {} and len(due(store)) == len(with_cues)
        fid = store.insert(NOTE, now=1.0)
        assert fid in due(store)
        store.delete(fid, now=2.0)
        assert fid not in rows(store) and store.integrity_check() == ["ok"]
    finally:
        store.close()
