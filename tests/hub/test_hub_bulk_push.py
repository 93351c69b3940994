"""A large push builds the HNSW index after its rows (hub/vector_index.py): the index is away
while the rows go in and back, the same, after; a push killed in between leaves a hub the
next push repairs; a second loader, or a run that holds the lock, goes row by row. The
thresholds are lowered here so that a few rows count as a large load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace

import psycopg
import pytest

from lore_plugin.core.config import Settings
from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.embedder import to_blob
from lore_plugin.hub import HubStore, vector_index
from lore_plugin.maintenance import hub_sync
from lore_plugin.store import Store

TEXTS = ["deploys go through ArgoCD on Tuesdays", "invoices live in PostgreSQL 16",
         "the React app is styled with Tailwind", "CI runs on self-hosted runners",
         "backups go to S3 every night", "the gateway rate limits per tenant"]


@pytest.fixture()
def small_is_large(monkeypatch):
    """Any load of 3 rows or more counts as large, whatever the table holds already."""
    monkeypatch.setattr(vector_index, "BULK_MIN", 3)
    monkeypatch.setattr(vector_index, "REBUILD_RATIO", 1e12)


def _state(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        return vector_index._state(conn)


def _definition(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT pg_get_indexdef(to_regclass(%s))",
                            (vector_index.NAME,)).fetchone()[0]


def _local(tmp_path, embedder) -> Store:
    store = Store(tmp_path / "local.db")
    topic = store.insert(NewFragment(content="Operations", summary="Operations", depth=0), 1.0)
    for text, vector in zip(TEXTS, embedder.embed(TEXTS)):
        store.insert(NewFragment(content=text, summary=text, depth=1), 2.0,
                     embedding=to_blob(vector), parent_id=topic)
    return store


def test_a_large_push_builds_the_vector_index_after_its_rows(
        tmp_path, embedder, hub_url, hub_space, small_is_large, monkeypatch):
    before = _definition(hub_url)
    seen: list[str] = []
    insert_rows = HubStore.insert_rows

    def watching(self, fragments, edges=()):
        if fragments:
            seen.append(_state(hub_url))
        return insert_rows(self, fragments, edges)
    monkeypatch.setattr(HubStore, "insert_rows", watching)
    local = _local(tmp_path, embedder)
    settings = replace(Settings(db_path=tmp_path / "local.db", home=tmp_path),
                       hub_url=hub_url)

    first = hub_sync.push(settings, local, hub_space.space)

    assert seen == ["missing"]  # the rows went in without the index
    assert _state(hub_url) == "valid" and _definition(hub_url) == before
    assert (first.fragments, first.edges) == (7, 6)
    query = embedder.embed(["how do we deploy"])[0]
    deploy = next(f["id"] for f in local.export_fragments() if f["summary"] == TEXTS[0])
    assert hub_space.vector_search(query, 1)[0][0] == deploy
    second = hub_sync.push(settings, local, hub_space.space)
    assert (second.fragments, second.edges) == (0, 0)
    assert seen == ["missing", "valid"]  # nothing new: the index stayed
    local.close()


def test_a_push_killed_while_the_index_is_away_is_repaired_by_the_next(
        tmp_path, embedder, hub_url, hub_space, small_is_large):
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, signal
        from lore_plugin.hub import vector_index
        with vector_index.set_aside({hub_url!r}, 10**6) as aside:
            assert aside
            os.kill(os.getpid(), signal.SIGKILL)
        """)], env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    assert _state(hub_url) == "missing"  # the kill came between the drop and the build
    local = _local(tmp_path, embedder)
    hub_space.insert_rows(list(local.export_fragments())[:2])  # a small load: row by row
    local.close()

    with hub_space.bulk_load(0) as aside:  # a push's first step repairs the hub
        assert not aside
        assert _state(hub_url) == "valid"
    query = embedder.embed(["invoices database"])[0]
    assert hub_space.vector_search(query, 1)  # the rows written meanwhile are indexed


def test_a_second_loader_goes_row_by_row_and_leaves_the_index_to_the_first(
        hub_url, small_is_large):
    with vector_index.set_aside(hub_url, 10**6) as first:
        assert first and _state(hub_url) == "missing"
        with vector_index.set_aside(hub_url, 10**6) as second:
            assert not second  # the lock is held: the other loader keeps the row path
        assert not vector_index.ensure(hub_url)  # and nobody builds it under the loader
        assert _state(hub_url) == "missing"
    assert _state(hub_url) == "valid"


def test_a_small_load_or_a_large_table_keeps_the_row_path(tmp_path, embedder, hub_url,
                                                           hub_space, monkeypatch):
    local = _local(tmp_path, embedder)
    hub_space.insert_rows(list(local.export_fragments()))
    local.close()
    with psycopg.connect(hub_url, autocommit=True) as conn:
        conn.execute("ANALYZE fragments")  # the table's size, as set_aside reads it
    monkeypatch.setattr(vector_index, "BULK_MIN", 100)
    with vector_index.set_aside(hub_url, 99) as aside:
        assert not aside and _state(hub_url) == "valid"
    monkeypatch.setattr(vector_index, "REBUILD_RATIO", 0.0)  # any table is large beside it
    with vector_index.set_aside(hub_url, 1000) as aside:
        assert not aside and _state(hub_url) == "valid"
