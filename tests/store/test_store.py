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


# Failure records, edges, the tree and candidate rows: test_contract.py, on both backends.


def test_sibling_texts_are_the_live_children_or_topics_that_child_ids_and_topic_ids_name(tmp_path):
    """The near-duplicate pre-check (recall/storing.may_repeat) reads only these two columns
    of a new fragment's siblings: the same fragments as child_ids / topic_ids, no more."""
    store = Store(tmp_path / "m.db")

    def add(fid: str, depth: int, parent: str | None = None) -> None:
        store.insert(NewFragment(content=f"content {fid}", summary=f"summary {fid}", depth=depth,
                                 id=fid * 32), now=1.0, parent_id=parent and parent * 32)
    with store.write():
        for fid, depth, parent in (("a", 0, None), ("b", 0, None), ("c", 1, "a"), ("d", 1, "a"),
                                   ("e", 1, "b"), ("f", 2, "c")):
            add(fid, depth, parent)
    store.supersede("d" * 32, "c" * 32, now=2.0)

    def texts(ids: list[str]) -> set[tuple[str, str]]:
        return {(f.summary, f.content) for f in store.get_many(ids).values()}
    assert set(store.sibling_texts("a" * 32, 1)) == texts(store.child_ids("a" * 32)) == {
        ("summary c", "content c")}  # d is superseded
    assert set(store.sibling_texts(None, 0)) == texts(store.topic_ids()) == {
        ("summary a", "content a"), ("summary b", "content b")}
    assert store.sibling_texts(None, 2) == [] and store.sibling_texts("f" * 32, 3) == []
    store.close()
