"""Migration 5 (hub/state_sql.py): the memory state in its narrow table. An existing hub's
values move over, once; a `lore hub init` killed in the middle of the move leaves version 4
and the next one finishes it; every insert path gives a fragment its state row; and what
recall and the cycle write no longer rewrites the fragment's row (the one with the vector)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from lore_plugin.core.relevance import MemoryState
from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore, bootstrap, init_hub
from lore_plugin.hub.schema import SCHEMA_VERSION
from tests.conftest import ROOT, python_env
from tests.hub.test_hub_schema import _database, _shape

STATE_OF = ("SELECT id, access_count, decay_rate, last_accessed, last_reinforced, "
            "relevance_score, author FROM {} WHERE space = 'personal' ORDER BY id")


def _hub_at_version_4(hub_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh hub migrated to version 4 only, holding three fragments of `personal` whose
    memory state recall had moved (in the fragments row, where version 4 kept it)."""
    url = _database(hub_url)
    with monkeypatch.context() as patch, psycopg.connect(url, autocommit=True) as conn:
        patch.setattr(bootstrap, "SCHEMA_VERSION", 4)
        assert bootstrap.migrate(conn, url) == 4
        conn.execute("INSERT INTO spaces (name, created_at) VALUES ('personal', 1)")
        for n in range(3):
            conn.execute(
                "INSERT INTO fragments (space, id, content, summary, depth, created_at, "
                "last_accessed, last_reinforced, embedding) VALUES ('personal', %s, %s, %s, "
                "2, 1, 1, 1, %s::vector)",
                (f"{n:032x}", f"fact {n}", f"fact {n}", "[" + ",".join(["0.05"] * 384) + "]"))
        conn.execute("UPDATE fragments SET access_count = 4, relevance_score = 0.25, "
                     "last_accessed = 50, last_reinforced = 50, decay_rate = 0.01 "
                     "WHERE id = %s", (f"{1:032x}",))
    return url


def _rows(url: str, table: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(STATE_OF.format(table)).fetchall()


def test_the_migration_moves_every_state_once_and_init_again_changes_nothing(
        hub_url, monkeypatch):
    url = _hub_at_version_4(hub_url, monkeypatch)
    before = _rows(url, "fragments")
    assert init_hub(url) == SCHEMA_VERSION - 4  # 5, and any migration after it
    assert _rows(url, "fragment_state") == before  # values and authors, row for row
    store = HubStore(url, "personal")
    try:
        moved = store.get(f"{1:032x}")
        assert (moved.access_count, moved.relevance_score, moved.last_accessed) == (4, 0.25, 50)
        shape, states = _shape(url), _rows(url, "fragment_state")
        assert init_hub(url) == 0
        assert (_shape(url), _rows(url, "fragment_state")) == (shape, states)
    finally:
        store.close()


def test_an_init_killed_in_the_middle_of_the_move_is_finished_by_the_next(
        hub_url, monkeypatch):
    url = _hub_at_version_4(hub_url, monkeypatch)
    before = _rows(url, "fragments")
    blocker = psycopg.connect(url)  # holds the move at its foreign key, mid-transaction
    blocker.execute("LOCK TABLE fragments IN ACCESS EXCLUSIVE MODE")
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; from lore_plugin.hub import init_hub; "
         "init_hub(sys.argv[1])", url], cwd=ROOT, env=python_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with psycopg.connect(url, autocommit=True) as watch:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the child is inside migration 5, waiting
                waiting = watch.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                    "query LIKE '%fragment_state%'").fetchall()
                if waiting:
                    break
                time.sleep(0.1)
            assert waiting, "the child never reached migration 5"
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
            blocker.rollback()
            while watch.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                (waiting[0][0],)).fetchone():
                assert time.monotonic() < deadline + 30, "its server process stayed"
                time.sleep(0.1)
            assert bootstrap.schema_version(watch) == 4
            assert watch.execute("SELECT to_regclass('fragment_state')").fetchone()[0] is None
    finally:
        blocker.close()
        if child.poll() is None:
            child.kill()
    assert init_hub(url) == SCHEMA_VERSION - 4  # 5, and any migration after it
    assert _rows(url, "fragment_state") == before
    with psycopg.connect(url) as conn:
        assert bootstrap.schema_version(conn) == SCHEMA_VERSION


def test_every_insert_path_gives_a_fragment_its_state_row(hub_space):
    store = hub_space
    one = store.insert(NewFragment(content="one", summary="one", depth=2, importance=0.8), 10.0)
    pushed = {"id": "ab" * 16, "content": "pushed", "summary": "pushed", "depth": 2,
              "embedding": None, "created_at": 5.0, "last_accessed": 70.0, "access_count": 6,
              "source_session": None, "superseded_by": None, "metadata": "{}",
              "importance": 0.4, "relevance_score": 0.75, "decay_rate": 0.02,
              "last_reinforced": 70.0, "project": None, "source": None, "basis": None,
              "confirmed_at": None}
    assert store.insert_rows([pushed]) == (1, 0)
    assert store.insert_rows([pushed]) == (0, 0)  # a second push adds nothing, state included
    rows = dict(store._all("SELECT id, relevance_score FROM fragment_state WHERE space = %s",
                           (store.space,)))
    assert rows == {one: pytest.approx(0.8 * 1.3), pushed["id"]: 0.75}
    store.save_memory_states({pushed["id"]: (MemoryState(7, 0.02, 80.0, 80.0), 0.9)})
    exported = {f["id"]: f for f in store.export_fragments()}  # pull reads the live state
    assert (exported[pushed["id"]]["access_count"], exported[pushed["id"]]["relevance_score"]
            ) == (7, 0.9)


def test_recall_and_the_cycle_leave_the_vector_s_row_as_it_was(hub_space):
    store = hub_space
    ids = [store.insert(NewFragment(content=f"fact {n}", summary=f"fact {n}", depth=2), 1.0,
                        embedding=b"\x00\x00\x80\x3f" * 384) for n in range(5)]

    def versions() -> dict[str, tuple[str, str]]:  # a row's physical version and its writer
        return {r[0]: (r[1], r[2]) for r in store._all(
            "SELECT id, ctid::text, xmin::text FROM fragments WHERE space = %s", (store.space,))}

    before = versions()
    store.save_memory_states({i: (MemoryState(2, 0.03, 9.0, 9.0), 0.7) for i in ids})
    store.record_recall_use(ids, ids[:1], 9.0)
    table = store.relevance_table()
    assert store.set_relevance_if_unchanged(
        [(0.5, r[0], r[4], r[2]) for r in table]) == len(ids)
    assert versions() == before
    assert {store.get(i).relevance_score for i in ids} == {0.5}


def test_the_usefulness_loop_judges_recalls_of_a_hub_space(hub_space):
    """capture/usefulness.apply_recall_use on a hub space (it was skipped there and logged):
    the fragment the assistant used gains a use and a reinforcement, the ignored one a run."""
    from lore_plugin.capture.usefulness import Recall, apply_recall_use

    store = hub_space
    used = store.insert(NewFragment(content="Billing deploys go out Tuesdays at 14:00 UTC.",
                                    summary="billing deploy window", depth=2), 1.0)
    ignored = store.insert(NewFragment(content="The staging database is rebuilt nightly.",
                                       summary="staging rebuild schedule", depth=2), 1.0)
    recall = Recall(shown=[used[:12], ignored[:12]], question="when can I deploy billing?",
                    after=["Billing deploys go out on Tuesdays at 14:00 UTC, so wait."])
    assert apply_recall_use(store, [recall], 100.0) == 1
    assert store.recall_use(used) == (1, 1, 0) and store.recall_use(ignored) == (1, 0, 1)
    assert store.get(used).access_count == 1 and store.get(ignored).access_count == 0
