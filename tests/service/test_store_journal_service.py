"""The store journal through the real memory service (issue 27): sixteen sessions' stores are
answered at the journal commit, a query from another session finds them at once, and a
SIGKILL of the service with requests still unplaced loses none and doubles none: the next
service places them at its start."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from lore_plugin.store import Store
from tests.service.test_service import client, contents, home, journal_left, model_dir
from tests.service_running import service_info, wait_until

__all__ = ["home", "model_dir"]  # the fixtures, shared with test_service


def tool(c: Any, name: str, **arguments: Any) -> dict[str, Any]:
    answer = c.request("tool", {"name": name, "arguments": arguments})
    assert not answer["isError"], answer
    return answer["structuredContent"]


def test_a_service_killed_with_stores_unplaced_loses_none_and_the_next_places_them_once(
        home: Path):
    db = home.parent / "memory.db"
    first = client(home).request("status")["pid"]
    acknowledged: list[tuple[str, dict]] = []
    lock = threading.Lock()

    def session(n: int) -> None:
        mine = client(home)
        for k in range(4):
            content = f"Session {n} note {k}: the nightly job for shard {n * 10 + k} runs at 0{k}:15"
            answer = tool(mine, "store_memory", content=content,
                          summary=f"Nightly job shard {n * 10 + k} at 0{k}:15")
            with lock:
                acknowledged.append((content, answer))

    threads = [threading.Thread(target=session, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert len(acknowledged) == 64
    assert any(a["pending"] for _, a in acknowledged)  # answered before placement
    left = journal_left(db)
    os.kill(first, signal.SIGKILL)
    assert left > 0, "placement kept up: the kill found nothing unplaced to lose"
    # Read-your-writes from another session, across the restart: the last store is found,
    # placed or still being placed by the new service.
    content, last = acknowledged[-1]
    found = tool(client(home), "query_memory", topic=last["summary"], depth=2, limit=5)
    assert last["id"] in ({f["id"] for f in found["fragments"]}
                          | {p["id"] for p in found["being_placed"]})
    second = client(home).request("status")["pid"]  # a new service, placing the journal
    assert second != first and service_info(home)["pid"] == second
    stored = contents(db)  # waits until the journal is empty
    for content, _ in acknowledged:
        assert stored.count(content) == 1, content
    reader = Store(db, readonly=True)
    try:
        for content, answer in acknowledged:  # each id given out names its fact
            assert reader.get(reader.resolve_id(answer["id"])).content == content
    finally:
        reader.close()
    wait_until(lambda: journal_left(db) == 0, what="an empty journal")


def test_an_older_service_with_stores_unplaced_hands_over_to_a_newer_one_losing_none(
        home: Path, monkeypatch: Any):
    """Version skew: an old service has a burst of stores answered and not all placed when a
    newer client arrives. The old one drains and exits; whatever it left in the journal, the
    new one places; every acknowledged store is there exactly once."""
    db = home.parent / "memory.db"
    monkeypatch.setenv("LORE_SERVICE_VERSION", "0.0.1")
    old = client(home).request("status")
    assert old["version"] == "0.0.1"
    acknowledged: list[str] = []
    lock = threading.Lock()

    def session(n: int) -> None:
        mine = client(home)
        for k in range(4):
            content = f"Old session {n} rule {k}: queue {n * 10 + k} drains by 0{k}:45"
            tool(mine, "store_memory", content=content, summary=f"Queue {n * 10 + k} drain time")
            with lock:
                acknowledged.append(content)

    threads = [threading.Thread(target=session, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert len(acknowledged) == 64 and journal_left(db) > 0  # answered, not all placed
    monkeypatch.delenv("LORE_SERVICE_VERSION")  # the upgrade
    now = client(home).request("status")
    assert now["pid"] != old["pid"] and now["version"] != "0.0.1"
    stored = contents(db)  # waits until the journal is empty
    assert all(stored.count(c) == 1 for c in acknowledged)
