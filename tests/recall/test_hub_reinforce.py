"""A hub space's recall reinforces after the answer (memory_base.after_answer): the answer
does not wait for the reinforcement's round trips, the next read through the same Memory
waits for it, and closing the Memory writes it. A query's reads share one connection."""

from __future__ import annotations

import threading
import time

from lore_plugin.hub import HubStore
from lore_plugin.recall.memory import Memory


def _gateway(hub: Memory) -> str:
    topic = hub.store("Deploying the gateway", "Gateway deployment", depth=0).id
    return hub.store("The gateway deploys with helm upgrade from the ops repo on Tuesdays.",
                     "Gateway deploys with helm on Tuesdays", parent_id=topic, depth=1).id


def test_the_answer_does_not_wait_for_reinforcement_and_the_next_read_sees_it(
        hub_space, embedder, clock, monkeypatch):
    hub = Memory(hub_space, embedder, clock=clock)
    helm = _gateway(hub)
    save, writing, release = HubStore.save_memory_states, threading.Event(), threading.Event()

    def held(self, states):
        writing.set()
        release.wait(10)
        return save(self, states)
    monkeypatch.setattr(HubStore, "save_memory_states", held)

    started = time.monotonic()
    found = hub.query("how is the gateway deployed?", depth=1, limit=1)
    answered = time.monotonic() - started

    assert found.fragments[0].fragment.id == helm
    assert answered < 5  # a reinforcement on the answer's path would have held it 10 s
    assert writing.wait(5) and not release.is_set()
    release.set()
    assert hub.reader.get(helm).access_count == 1  # the read waited for the write
    hub.close()


def test_closing_the_memory_writes_the_last_reinforcement(hub_space, embedder, clock,
                                                          monkeypatch):
    hub = Memory(hub_space, embedder, clock=clock)
    helm = _gateway(hub)
    save = HubStore.save_memory_states
    monkeypatch.setattr(HubStore, "save_memory_states",
                        lambda self, states: (time.sleep(0.5), save(self, states))[1])
    hub.query("how is the gateway deployed?", depth=1, limit=1)
    hub.close()
    assert hub_space.get(helm).access_count == 1


def test_a_query_borrows_one_connection_per_thread(hub_space, embedder, clock, monkeypatch):
    hub = Memory(hub_space, embedder, clock=clock)
    _gateway(hub)
    hub.query("warm the pool and the model", depth=1)
    hub.settle()
    lent = []
    getconn = type(hub_space.pool).getconn

    def counting(pool, *args, **kwargs):
        lent.append(threading.current_thread().name)
        return getconn(pool, *args, **kwargs)
    monkeypatch.setattr(type(hub_space.pool), "getconn", counting)
    hub.query("how is the gateway deployed?", depth=1)
    hub.settle()
    # The query's thread, the keyword thread, the reinforcement's reads and its write
    # transaction: each borrows once, where each statement borrowed before.
    assert len(lent) <= 4, lent
    hub.close()
