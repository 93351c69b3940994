"""One model run a store (recall/recontext.py, group_commit.py): a placed fact is stored with
its placement query's vector and marked; the writer then gives it the vector store_knowledge
would have (its text under its parent's summary), in the database and in the shared index;
a repeat is still decided with that exact vector; a crash leaves the marks for the next
writer or the service's warm-up."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from lore_plugin.embedding.embedder import LocalEmbedder, from_blob
from lore_plugin.recall.group_commit import GroupWriter, group_writer
from lore_plugin.recall.memory import Memory, embedding_text
from lore_plugin.recall.storing import store_knowledge
from lore_plugin.store import Store
from tests.conftest import MODEL_CACHE
from tests.recall.test_group_commit import until


def subject_fact(subject: str, n: int) -> tuple[str, str]:
    return (f"The {subject} service's timeout is {100 + n} seconds, agreed in review {n}.",
            f"{subject.capitalize()} timeout is {100 + n} s (review {n})")


def assert_final_vectors(db: Path, embedder: LocalEmbedder | None = None) -> None:
    """No mark is left, and every live fragment's vector is the one Memory.store gives it."""
    embedder = embedder or LocalEmbedder(MODEL_CACHE)
    store = Store(db, readonly=True)
    try:
        assert store.recontext_count() == 0
        frags = store.get_many([r[0] for r in store.execute(
            "SELECT id FROM fragments WHERE superseded_by IS NULL")])
        rows = [(f.summary, f.content, frags[f.parent_id].summary if f.parent_id else None,
                 store.embedding_of(f.id)) for f in frags.values()]
    finally:
        store.close()
    assert rows
    wanted = embedder.embed([embedding_text(s, c, p) for s, c, p, _ in rows])
    got = np.stack([from_blob(r[3]) for r in rows])
    assert float(np.abs(wanted - got).max()) < 1e-5


def marks(db: Path) -> int:
    store = Store(db, readonly=True)
    try:
        return store.recontext_count()
    finally:
        store.close()


def seeded(memory: Memory) -> None:
    for subject in ("billing", "search", "mailer"):
        for n in range(3):
            store_knowledge(memory, *subject_fact(subject, n))


def test_a_placed_store_runs_the_model_once_then_gets_the_vector_store_knowledge_gives(
        memory, embedder):
    seeded(memory)
    writer = group_writer(memory)  # shares the memory's index, as the service's does
    memory.search("warm", limit=1)  # the index loaded before the store
    stored = writer.submit(*subject_fact("billing", 7))
    assert stored.provisional and not stored.duplicate and stored.placed
    parent = memory.parent(stored.fragment.id)
    assert parent is not None
    final = embedder.embed([embedding_text(stored.fragment.summary, stored.fragment.content,
                                           parent.summary)])[0]
    until(lambda: writer.recontext_calls == 1)  # idle: the writer replaces it meanwhile
    # The shared index holds the final vector in place, without reloading.
    assert memory.index.similarities(final, [stored.fragment.id])[stored.fragment.id] > 0.9999
    memory.close()
    assert writer.model_calls == 1  # the placement query's vector served the fact at first
    assert writer.recontext_calls == 1  # and its final vector came after, in its own call
    assert_final_vectors(memory.db_path, embedder)


def test_concurrent_stores_share_one_model_call_each_batch_and_end_with_exact_vectors(
        memory, embedder):
    seeded(memory)
    writer = GroupWriter(lambda: Store(memory.db_path), embedder, clock=memory.clock,
                         project=memory.project)
    with ThreadPoolExecutor(8) as pool:
        stored = list(pool.map(lambda n: writer.submit(*subject_fact("search", 10 + n)),
                               range(20)))
    until(lambda: marks(memory.db_path) == 0)  # replaced when the writer is idle
    writer.close()
    assert all(s.provisional for s in stored)  # none embedded its text before its answer
    assert writer.model_calls < 20 and writer.recontext_calls >= 2  # 20 in batches of 16
    assert_final_vectors(memory.db_path, embedder)


def test_a_repeat_in_other_words_is_still_decided_with_the_exact_vector(memory, embedder):
    seeded(memory)
    original = ("The search service's timeout is 101 seconds, agreed in review 1.",
                "Search review 1 timeout")  # the words of a seeded fact, another summary
    alone = Memory(memory.db_path, embedder, memory.clock, memory.project)
    writer = GroupWriter(lambda: Store(memory.db_path), embedder, clock=memory.clock,
                         project=memory.project)
    try:
        grouped = writer.submit(*original)
    finally:
        writer.close()
    assert grouped.duplicate and not grouped.provisional
    # store_knowledge decides the same on the same memory
    assert store_knowledge(alone, *original).duplicate
    alone.close()


def test_the_marks_a_crash_leaves_are_finished_by_the_services_warm_up(memory, embedder):
    from lore_plugin.service.engine import Service

    seeded(memory)
    store = Store(memory.db_path)
    try:
        store.execute("UPDATE fragments SET embedding = ? WHERE depth = 2",
                      (embedder.embed(["a provisional vector"])[0].astype("<f4").tobytes(),))
        for (fid,) in store.execute("SELECT id FROM fragments WHERE depth = 2"):
            store.mark_recontext(fid)
        assert store.recontext_count() == 9
    finally:
        store.close()
    service = Service(Memory(memory.db_path, embedder, memory.clock, memory.project))
    service.warm_up()
    assert_final_vectors(memory.db_path, embedder)
    service.close()


class GatedModel:
    """The real model, whose call for a text naming GATED waits until `open` is set: a store
    held in the first stage (its placement query being embedded) for as long as a test
    needs. The vectors are the model's own."""

    def __init__(self, embedder: LocalEmbedder) -> None:
        import threading

        self.embedder = embedder
        self.open = threading.Event()

    @property
    def available(self) -> bool:
        return self.embedder.available

    def embed(self, texts: list[str]) -> np.ndarray:
        if any("GATED" in t for t in texts):
            assert self.open.wait(60), "the test never opened the gate"
        return self.embedder.embed(texts)


def test_the_writer_replaces_vectors_only_once_no_store_is_on_its_way(memory, embedder):
    """The replacements wait while the first stage still embeds a store for the writer: a
    model call for them then would hold that store up. Once it is written and nothing else
    comes, they are done."""
    from tests.recall.test_group_commit import _request, database_held

    seeded(memory)
    model = GatedModel(embedder)
    writer = GroupWriter(lambda: Store(memory.db_path), model, clock=memory.clock,  # type: ignore[arg-type]
                         project=memory.project)
    try:
        with database_held(memory.db_path):  # the writer busy with the first store
            # Each accepted into the store journal (its own file) and handed on in turn.
            first = writer.submit_request(_request(subject_fact("billing", 7)))
            until(lambda: writer.accepted_seq == 1 and writer.queued == 0)
            second = writer.submit_request(_request(subject_fact("mailer", 7)))  # to the writer
            until(lambda: writer.accepted_seq == 2)
            held = writer.submit_request(_request(subject_fact("search", 8)[:1] + (
                "GATED search timeout is 108 s (review 8)",)))  # to the first stage
            until(lambda: writer.accepted_seq == 3)
            assert writer.queued == 2 and writer.ready == 1
        assert first.result(timeout=60).provisional and second.result(timeout=60).provisional
        assert marks(memory.db_path) == 2
        time.sleep(1.0)  # five times the idle wait: the old writer replaced meanwhile
        assert writer.recontext_calls == 0 and marks(memory.db_path) == 2
        model.open.set()
        assert held.result(timeout=60).provisional
        # The count follows the commit that clears the marks: wait for both, or a loaded
        # machine sees the marks gone a moment before the call is counted.
        until(lambda: marks(memory.db_path) == 0 and writer.recontext_calls >= 1)
    finally:
        model.open.set()
        writer.close()
    assert_final_vectors(memory.db_path, embedder)
