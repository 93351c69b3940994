"""Faults on the hub: a connection killed mid-transaction (pg_terminate_backend) or cut on
the network (a TCP proxy that drops everything) loses nothing and duplicates nothing, and
the pool recovers; 8 processes from 2 homes writing one space lose and duplicate nothing."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import psycopg
import pytest
from psycopg import conninfo

from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore, HubUnavailable
from tests.hub.hub_writer import write_for
from tests.hub.tcp_proxy import TcpProxy

WRITE_SECONDS = float(os.environ.get("LORE_HUB_WRITE_SECONDS", "10"))


def _frag(text: str) -> NewFragment:
    return NewFragment(content=text, summary=text, depth=2)


def _rows(store: HubStore) -> list[tuple[str, str]]:
    return store._all("SELECT id, content FROM fragments WHERE space = %s", (store.space,))


def test_a_backend_killed_mid_transaction_keeps_nothing_of_it_and_the_pool_recovers(
        hub_space, hub_url):
    store = hub_space
    with pytest.raises(HubUnavailable, match="nothing of that write was kept"):
        with store.write():
            for i in range(3):
                store.insert(_frag(f"fact {i}"), 1.0)
            pid = store._one("SELECT pg_backend_pid()")
            with psycopg.connect(hub_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            store.insert(_frag("fact 3"), 1.0)
    assert store.count_fragments() == 0
    with store.write():  # the same write again, on a fresh connection of the pool
        for i in range(4):
            store.insert(_frag(f"fact {i}"), 1.0)
    assert sorted(c for _, c in _rows(store)) == [f"fact {i}" for i in range(4)]


def test_idle_pooled_connections_killed_between_writes_are_replaced_unseen(hub_space, hub_url):
    store = hub_space
    store.insert(_frag("before"), 1.0)
    with psycopg.connect(hub_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
            "application_name = '' AND pid <> pg_backend_pid() AND datname = 'postgres' "
            "AND state = 'idle'").fetchone()[0]
    assert killed >= 1
    store.insert(_frag("after"), 1.0)
    assert sorted(c for _, c in _rows(store)) == ["after", "before"]


def test_a_network_cut_during_writes_loses_and_duplicates_nothing(hub_space):
    """Batches as ingestion writes them: new fragments (fresh ids each attempt, as a new
    extraction makes) and the transcript's watermark in one transaction, held open a moment
    so that cuts land inside it. After an error the writer reads the watermark, as the
    next ingestion does: moved, the batch was committed (its answer was what got lost);
    not moved, nothing of it was kept, and it is written again."""
    socket_dir = conninfo.conninfo_to_dict(hub_space.url)["host"]
    proxy = TcpProxy(f"{socket_dir}/.s.PGSQL.5432")
    proxy.start()
    store = HubStore(f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres", hub_space.space,
                     pool_size=2)
    acked: list[str] = []
    failed: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        batch = 0
        while not stop.is_set():
            batch += 1
            while True:
                ids = [os.urandom(16).hex() for _ in range(3)]
                try:
                    with store.write():
                        for fid in ids:
                            store.insert(NewFragment(id=fid, content=f"batch {batch} note {fid}",
                                                     summary=f"batch {batch}", depth=2), 1.0)
                        store._one("SELECT pg_sleep(0.03)")
                        store.set_watermark("/t/net.jsonl", batch, 1.0)
                    break
                except HubUnavailable:
                    failed.append(batch)
                    if _watermark_after_cut(store) >= batch:
                        break  # committed: only the acknowledgement was lost
            acked.extend(ids)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(3):  # three cuts, each while a batch is in flight
            time.sleep(0.7)
            before = len(acked)
            proxy.cut()
            time.sleep(0.4)
            proxy.start()
            time.sleep(1.0)
            assert len(acked) > before, "the pool did not recover after the cut"
    finally:
        stop.set()
        thread.join(timeout=60)
        store.close()
        proxy.cut()
    assert failed, "no cut landed inside a transaction: the test proved nothing"
    rows = _rows(hub_space)
    assert sorted(i for i, _ in rows) == sorted(acked)  # 0 lost, 0 extra
    assert len({c for _, c in rows}) == len(rows)  # 0 duplicated
    assert sorted(int(c.split()[1]) for _, c in rows) == sorted(
        b for b in range(1, len(acked) // 3 + 1) for _ in range(3))  # each batch once
    assert hub_space.watermark("/t/net.jsonl") == len(acked) // 3


def _watermark_after_cut(store: HubStore) -> int:
    while True:
        try:
            return store.watermark("/t/net.jsonl")
        except HubUnavailable:
            time.sleep(0.1)  # still cut


def test_eight_processes_from_two_homes_write_one_space_without_loss_or_duplicates(hub_space):
    ctx = multiprocessing.get_context("spawn")
    jobs = [(hub_space.url, hub_space.space, f"home-{h}", p, WRITE_SECONDS)
            for h in range(2) for p in range(4)]
    with ctx.Pool(len(jobs)) as pool:
        results = pool.starmap(write_for, jobs)
    acked = [fid for _, _, ids, _ in results for fid in ids]
    rows = _rows(hub_space)
    assert len(acked) > 8 * 10 and not any(f for *_, f in results)  # all done, none failed
    assert sorted(i for i, _ in rows) == sorted(acked)  # 0 lost, 0 extra
    assert len({c for _, c in rows}) == len(rows)  # 0 duplicated
    for home, proc, ids, _ in results:
        marks = HubStore(hub_space.url, hub_space.space, machine=home)
        assert marks.watermark(f"/t/{proc}.jsonl") == len(ids)  # each home's own watermark
        marks.close()
