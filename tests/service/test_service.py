"""The memory service as real processes: one per home however many start at once, private,
gone when idle, no acknowledged write lost and none doubled when it is SIGKILLed mid-store,
replaced without losing a write when a newer client meets it, and the clients' fallback."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lore_plugin.embedding.embedder import assemble_from_packages
from lore_plugin.recall.prompt_socket import exchange
from lore_plugin.service.client import ServiceClient, Unavailable
from lore_plugin.store import Store
from lore_plugin.store.journal import StoreJournal, journal_path
from tests.conftest import MODEL_CACHE, PYTHON, ROOT, python_env
from tests.service_running import alive, service_info, stop_service, wait_gone, wait_until


@pytest.fixture(scope="module")
def model_dir() -> Path:
    folder = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    assert folder is not None, "the embedding model packages must be installed"
    return folder


@pytest.fixture
def home(tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """A Lore home whose services the clients in this process start (they inherit this
    environment); every service is stopped after the test."""
    home = tmp_path / "home"
    for name, value in {"LORE_HOME": str(home), "LORE_DB_PATH": str(tmp_path / "memory.db"),
                        "LORE_EMBED_MODEL_DIR": str(model_dir), "LORE_NO_DOWNLOAD": "1",
                        "LORE_SERVICE": "on",
                        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
                        }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("LORE_CONFIG", raising=False)
    monkeypatch.delenv("LORE_SERVICE_VERSION", raising=False)
    yield home
    stop_service(home)


def client(home: Path, **kwargs: Any) -> ServiceClient:
    return ServiceClient(str(home), str(home.parent / "memory.db"), "/work/project", **kwargs)


def store(c: ServiceClient, content: str, summary: str) -> dict[str, Any]:
    answer = c.request("tool", {"name": "store_memory",
                                "arguments": {"content": content, "summary": summary}})
    assert not answer["isError"], answer
    return answer["structuredContent"]


def contents(db: Path) -> list[str]:
    """Every fragment's content, once the store journal is empty: a store is answered at its
    journal commit and placed after (recall/store_journal.py)."""
    wait_until(lambda: not journal_left(db), timeout=180, what="the store journal placed")
    reader = Store(db, readonly=True)
    try:
        return [row[0] for row in reader.conn.execute("SELECT content FROM fragments")]
    finally:
        reader.close()


def journal_left(db: Path) -> int:
    path = journal_path(db)
    if not path.exists():
        return 0
    journal = StoreJournal(path)
    try:
        return journal.count()
    finally:
        journal.close()


def test_services_started_at_once_leave_exactly_one_and_it_is_private(home: Path):
    starters = [subprocess.Popen([PYTHON, "-m", "lore_plugin.service"], env=python_env())
                for _ in range(4)]
    info = wait_until(lambda: service_info(home), what="a service to announce itself")
    losers = [p for p in starters if p.pid != info["pid"]]
    assert [p.wait(timeout=60) for p in losers] == [0, 0, 0]
    assert alive(info["pid"]) and client(home).request("status")["pid"] == info["pid"]
    run = home / "run"
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    for name in ("service.json", "service.sock", "service.lock"):
        assert stat.S_IMODE((run / name).stat().st_mode) == 0o600, name
    with pytest.raises(EOFError):  # the wrong token gets no answer at all
        exchange({**info, "token": "0" * 32}, {"op": "status", "protocol": 1},
                 time.monotonic() + 5)
    stop_service(home)
    starters[[p.pid for p in starters].index(info["pid"])].wait(timeout=30)
    assert service_info(home) is None and not (run / "service.sock").exists()


def test_the_service_exits_after_its_idle_time(home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LORE_SERVICE_IDLE", "1")
    pid = client(home).request("status")["pid"]
    wait_gone(pid, timeout=30)
    assert service_info(home) is None


def test_sigkill_mid_store_loses_no_acknowledged_write_and_stores_none_twice(home: Path):
    """Four writers store while the service is killed under them: the requests in flight are
    asked again of a new service and succeed; every fact is there exactly once."""
    first = client(home).request("status")["pid"]
    acknowledged: list[tuple[str, str]] = []
    errors: list[str] = []
    attempted: list[str] = []
    killed = threading.Event()

    def writer(n: int) -> None:
        # Each writer goes on until it has stored 3 facts after the kill: a store is answered
        # at the journal's commit (under a millisecond), so a fixed dozen could all be done
        # before the kill lands, and no writer would ever meet the dead service.
        mine = client(home)
        after = 0
        for k in range(400):
            content = f"Writer {n} fact {k}: the deploy script tags build {n * 1000 + k}"
            seen_kill = killed.is_set()
            attempted.append(content)
            try:
                acknowledged.append((content, store(mine, content, f"deploy tag {n}-{k}")["id"]))
            except Unavailable as exc:  # the request in flight at the kill is asked again
                errors.append(str(exc))
            after += seen_kill
            if after >= 3:
                return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: len(acknowledged) >= 6, what="the first writes")
    os.kill(first, signal.SIGKILL)
    killed.set()
    for t in threads:
        t.join(timeout=180)
    assert not any(t.is_alive() for t in threads)
    second = service_info(home)
    assert second is not None and second["pid"] != first  # the writers started a new one
    stored = contents(home.parent / "memory.db")
    for content, _ in acknowledged:
        assert stored.count(content) == 1, content
    writes = [c for c in stored if c.startswith("Writer ")]
    assert len(writes) == len(set(writes))  # a retried store found its first copy
    assert {c for c, _ in acknowledged} <= set(writes)
    assert errors == [] and len(acknowledged) == len(attempted)  # every store answered
    assert len(attempted) < 4 * 400  # each writer met the kill and stopped after it


def test_a_newer_client_drains_an_older_service_and_takes_over_losing_no_write(
        home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LORE_SERVICE_VERSION", "0.0.1")
    old_client = client(home)
    old = old_client.request("status")
    assert old["version"] == "0.0.1"
    acknowledged: list[str] = []
    done = threading.Event()

    def old_writer() -> None:  # a session still on the old front keeps writing meanwhile
        k = 0
        while not done.is_set() and k < 40:
            content = f"Old session fact {k} about the release checklist"
            store(old_client, content, f"release checklist {k}")
            acknowledged.append(content)
            k += 1

    thread = threading.Thread(target=old_writer)
    thread.start()
    wait_until(lambda: len(acknowledged) >= 3, what="the old session's first writes")
    monkeypatch.delenv("LORE_SERVICE_VERSION")  # the upgrade: this code's own version
    new_client = client(home)
    fact = store(new_client, "The new front's first fact: canary before rollout",
                 "canary before rollout")
    done.set()
    thread.join(timeout=120)
    wait_gone(old["pid"], timeout=30)
    now = new_client.request("status")
    assert now["pid"] != old["pid"] and now["version"] != "0.0.1"
    stored = contents(home.parent / "memory.db")
    assert all(stored.count(c) == 1 for c in acknowledged) and len(acknowledged) >= 3
    assert stored.count("The new front's first fact: canary before rollout") == 1
    assert fact["id"]


def test_a_client_that_cannot_start_a_service_says_so_within_its_wait(home: Path):
    home.mkdir(parents=True, exist_ok=True)
    (home / "run").write_text("not a folder")  # no private folder: no service can listen
    started = time.monotonic()
    lonely = client(home, wait=2)
    with pytest.raises(Unavailable):
        lonely.request("status")
    assert time.monotonic() - started < 10


def test_a_second_database_in_the_same_home_is_served_in_process_at_once(home: Path):
    """One service a home: while it serves memory.db, a caller of another database (its own
    LORE_DB_PATH) hears at once that it must serve itself, instead of starting services that
    find the lock held until its whole wait (30 s) is over."""
    first = client(home).request("status")["pid"]
    other = ServiceClient(str(home), str(home.parent / "other.db"), "/work/project")
    assert other.start_wait >= 30  # the default wait, which it must not sit through
    started = time.monotonic()
    with pytest.raises(Unavailable, match="another database"):
        other.request("status")
    assert time.monotonic() - started < 2
    assert client(home).request("status")["pid"] == first  # the first one serves on


def test_a_client_keeps_its_connection_between_requests_and_replaces_one_that_died(home: Path):
    """The front's hop (service/client.py, `keep`): one connection serves request after
    request, saving a connect and a service thread each; a service killed meanwhile costs
    the next request nothing but a new connection to the new service."""
    mine = client(home)
    first = mine.request("status")["pid"]
    kept = mine._kept[0] if mine._kept else None
    assert kept is not None
    for _ in range(3):
        assert mine.request("status")["pid"] == first
        assert mine._kept is not None and mine._kept[0] is kept  # the same connection
    os.kill(first, signal.SIGKILL)
    wait_gone(first, timeout=30)
    again = mine.request("status")["pid"]  # a new service, asked on a new connection
    assert again != first and mine._kept is not None and mine._kept[0] is not kept
    mine.close()
