"""The Stop hook's lean watermark read agrees with Store's, and steps aside when unsure."""

from __future__ import annotations

import apsw

from lore_plugin.hooks.dispatch import _watermark
from lore_plugin.store import Store
from lore_plugin.store.peek import watermark
from lore_plugin.store.schema import SCHEMA_VERSION


def test_it_reads_the_same_watermark_as_the_store(tmp_path):
    db = tmp_path / "memory.db"
    store = Store(db)
    store.set_watermark("/t/a.jsonl", 1234, 1.0)
    store.set_watermark("/t/b.jsonl", 99, 1.0)
    store.close()
    assert watermark(str(db), "/t/a.jsonl") == 1234
    assert watermark(str(db), "/t/b.jsonl") == 99
    assert watermark(str(db), "/t/unknown.jsonl") == 0


def test_it_declines_a_database_of_another_schema_version(tmp_path):
    db = tmp_path / "memory.db"
    store = Store(db)
    store.set_watermark("/t/a.jsonl", 1234, 1.0)
    store.close()
    conn = apsw.Connection(str(db))
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION - 1}")
    conn.close()
    assert watermark(str(db), "/t/a.jsonl") is None


def test_it_declines_a_file_that_is_no_database(tmp_path):
    junk = tmp_path / "memory.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    assert watermark(str(junk), "/t/a.jsonl") is None
    assert watermark(str(tmp_path / "missing" / "memory.db"), "/t/a.jsonl") is None


def test_the_hook_falls_back_to_the_store_which_migrates_an_older_file(tmp_path):
    from tests.store.test_store import make_seed_database

    db = tmp_path / "memory.db"
    make_seed_database(db)  # schema version 1, watermark 1234 for /t/a.jsonl
    assert watermark(str(db), "/t/a.jsonl") is None
    assert _watermark(str(db), "/t/a.jsonl") == 1234
    assert watermark(str(db), "/t/a.jsonl") == 1234  # migrated now: the lean read answers
