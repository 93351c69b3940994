"""The storage layer: migrations, WAL, read-only readers, watermarks and failure records."""

from __future__ import annotations

import multiprocessing

import apsw
import pytest

from lore_plugin.core.errors import SchemaTooNew
from lore_plugin.core.types import NewFragment
from lore_plugin.store import Store, StoreError
from lore_plugin.store.schema import MIGRATIONS, SCHEMA_VERSION


def make_seed_database(path) -> None:
    """A database exactly as the seed (schema version 1) left it, with some knowledge in it."""
    conn = apsw.Connection(str(path))
    conn.execute(MIGRATIONS[0])
    conn.execute("PRAGMA user_version=1")
    conn.execute("INSERT INTO fragments (id, content, summary, depth, created_at, last_accessed, "
                 "last_reinforced) VALUES ('aaaaaaaa11111111', 'Kafka retains events for 7 days', "
                 "'Kafka retention', 0, 1, 1, 1)")
    conn.execute("INSERT INTO fragments (id, content, summary, depth, created_at, last_accessed, "
                 "last_reinforced) VALUES ('bbbbbbbb22222222', 'Consumers commit offsets every 5s', "
                 "'Offset commits', 1, 1, 1, 1)")
    conn.execute("INSERT INTO edges VALUES ('e1', 'aaaaaaaa11111111', 'bbbbbbbb22222222', "
                 "'hierarchical', 1.0, 1)")
    conn.execute("INSERT INTO watermarks VALUES ('/t/a.jsonl', 1234, 1)")
    conn.close()


def test_a_seed_database_upgrades_in_place_and_keeps_its_knowledge(tmp_path):
    path = tmp_path / "old.db"
    make_seed_database(path)
    store = Store(path)
    assert store.user_version() == SCHEMA_VERSION
    assert store.get("aaaaaaaa11111111").summary == "Kafka retention"
    assert store.child_ids("aaaaaaaa11111111") == ["bbbbbbbb22222222"]
    assert store.watermark("/t/a.jsonl") == 1234
    assert [f.id for f, _ in store.keyword_search('"offsets"', 5)] == ["bbbbbbbb22222222"]  # FTS backfilled
    assert store.get("aaaaaaaa11111111").project is None
    assert store.fts_consistent() and store.integrity_check() == ["ok"]
    store.close()


def test_a_failed_migration_leaves_the_previous_version_intact(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    make_seed_database(path)
    import lore_plugin.store.connection as store_module

    broken = [MIGRATIONS[0], MIGRATIONS[1] + "\nCREATE TABLE fragments (x);"]
    monkeypatch.setattr(store_module, "MIGRATIONS", broken)
    with pytest.raises(apsw.SQLError):
        Store(path)
    conn = apsw.Connection(str(path))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'fragments_fts'").fetchone()[0] == 0
    conn.close()
    monkeypatch.undo()
    assert Store(path).user_version() == SCHEMA_VERSION


def test_a_database_from_a_future_version_is_refused_untouched(tmp_path):
    path = tmp_path / "future.db"
    Store(path).close()
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 5}")
    conn.close()
    with pytest.raises(SchemaTooNew, match="Upgrade Lore"):
        Store(path)
    conn = apsw.Connection(str(path))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 5


def _open_and_insert(path: str, n: int) -> None:
    store = Store(path)
    for i in range(n):
        store.insert(NewFragment(content=f"c{i}", summary=f"s{i}", depth=0), now=1.0)
    store.close()


def test_concurrent_first_opens_migrate_once_and_lose_no_writes(tmp_path):
    path = str(tmp_path / "race.db")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_open_and_insert, args=(path, 50)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = Store(path)
    assert store.count_fragments() == 200
    assert store.user_version() == SCHEMA_VERSION


def test_the_database_runs_in_wal_mode_and_readers_cannot_write(tmp_path):
    path = tmp_path / "m.db"
    writer = Store(path)
    assert writer.execute("PRAGMA journal_mode")[0][0] == "wal"
    reader = Store(path, readonly=True)
    with pytest.raises(apsw.ReadOnlyError):
        reader.conn.execute("DELETE FROM fragments")
    writer.insert(NewFragment(content="x", summary="y", depth=0), now=1.0)
    assert reader.count_fragments() == 1


def test_a_read_only_store_on_a_missing_file_creates_it_first(tmp_path):
    reader = Store(tmp_path / "sub" / "new.db", readonly=True)
    assert reader.count_fragments() == 0


def test_an_unopenable_path_gives_a_clear_error(tmp_path):
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError, match="cannot open"):
        Store(tmp_path / "dir.db")


def test_failures_back_off_and_park_after_repeated_attempts(tmp_path):
    store = Store(tmp_path / "m.db")
    for attempt in range(1, 4):
        assert store.record_failure("/t/x.jsonl", 0, 100, "boom", now=1000.0, backoff=60,
                                    park_after=3) == attempt
    failure = store.failure("/t/x.jsonl")
    assert failure["parked"] == 1 and failure["next_retry"] == 1000.0 + 60 * 4
    assert len(store.failures(parked_only=True)) == 1
    assert store.unpark_all(now=2000.0) == 1
    assert store.failure("/t/x.jsonl")["parked"] == 0
    store.clear_failure("/t/x.jsonl")
    assert store.failure("/t/x.jsonl") is None


def test_edges_touching_finds_either_end_of_one_kind_in_one_statement(tmp_path):
    store = Store(tmp_path / "m.db")
    a, b, c, d = (store.insert(NewFragment(content=x, summary=x, depth=2), now=1.0) for x in "abcd")
    store.link(a, b, "temporal", 0.8, 1.0)
    store.link(c, a, "temporal", 0.5, 1.0)
    store.link(a, d, "associative", 0.9, 1.0)
    store.link(c, d, "temporal", 0.7, 1.0)
    found = {(e.source, e.target) for e in store.edges_touching([a], ("temporal",))}
    assert found == {(a, b), (c, a)}
    assert {(e.source, e.target) for e in store.edges_touching([b, d], ("temporal",))} == {(a, b), (c, d)}
    assert store.edges_touching([], ("temporal",)) == []


def _tree(store: Store) -> dict[str, str]:
    """topic > two concepts > facts (one superseded) > a detail, by name."""
    ids: dict[str, str] = {}
    for name, depth, parent in [("topic", 0, None), ("c1", 1, "topic"), ("c2", 1, "topic"),
                                ("f1", 2, "c1"), ("f2", 2, "c1"), ("f3", 2, "c2"),
                                ("d1", 3, "f1")]:
        ids[name] = store.insert(NewFragment(content=name, summary=name, depth=depth), now=1.0,
                                 parent_id=ids[parent] if parent else None)
    store.supersede(ids["f2"], ids["f1"], now=2.0)
    return ids


def test_descendants_at_depth_walks_every_root_to_that_depth_in_one_statement(tmp_path):
    store = Store(tmp_path / "m.db")
    ids = _tree(store)
    name = {v: k for k, v in ids.items()}
    found = store.descendants_at_depth([ids["topic"], ids["c2"], ids["f3"]], 2)
    assert sorted((name[r], name[d]) for r, d in found) == [("c2", "f3"), ("topic", "f1"),
                                                          ("topic", "f3")]
    with_old = store.descendants_at_depth([ids["topic"]], 2, include_superseded=True)
    assert sorted(name[d] for _, d in with_old) == ["f1", "f2", "f3"]
    assert [name[d] for _, d in store.descendants_at_depth([ids["c1"]], 3)] == ["d1"]
    assert store.descendants_at_depth([], 2) == []


def test_candidate_rows_can_skip_text_and_parents_and_parents_come_in_one_batch(tmp_path):
    store = Store(tmp_path / "m.db")
    ids = _tree(store)
    full = store.get_many([ids["f1"], ids["d1"]])
    assert full[ids["d1"]].parent_id == ids["f1"] and full[ids["d1"]].summary == "d1"
    light = store.get_many([ids["f1"], ids["d1"]], with_text=False, with_parent=False)
    assert light[ids["d1"]].parent_id is None and light[ids["d1"]].summary == ""
    assert light[ids["d1"]].depth == 3 and light[ids["f1"]].created_at == 1.0
    assert store.parent_ids([ids["d1"], ids["f3"], ids["topic"]]) == {
        ids["d1"]: ids["f1"], ids["f3"]: ids["c2"]}
