"""Group commit for store_memory: one writer thread takes every store queued meanwhile,
embeds their texts together and writes them in one transaction.

Storing one fact alone costs two runs of the model (its placement query, then its text in
the context of its parent) and one transaction; a batch of n pays one model call over the n
placement queries and one transaction before its answers, a placed fact keeping its query's
vector until the writer, once idle, gives it the other (recontext.py). The rules are
store_knowledge's own (storing.place_knowledge and keep_placed), applied in the order the
requests arrived, and each request reads what the ones before it in the batch wrote
(group_view.BatchMemory): two identical stores in one batch give one fact and one
duplicate, as they would one after the other.

What a caller can count on:
- `submit` returns only once its write is committed; the answer is the same `Stored` that
  store_knowledge gives.
- A request that fails on its own (empty text, an unknown parent) fails alone: its
  savepoint is rolled back and the rest of its batch is written.
- A database error fails the whole batch, which is retried from scratch (nothing of it was
  committed) and, failing again, every caller in it gets GroupWriteFailed.
- A crash before the commit loses only what nobody was told was stored; one after it loses
  nothing, and a caller that retries gets `duplicate=True`, not a second copy.

The service (one writer for every session) and the in-process MCP server (`group_writer`)
both use it."""

from __future__ import annotations

import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from datetime import tzinfo
from functools import partial
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidInput, LoreError
from ..core.faults import crash_point
from ..store import DatabaseError, Store, StoreError
from .group_requests import StoreRequest, alone, keep, placed_here, query_words
from .group_view import BatchIndex, BatchMemory, PrefilledEmbedder
from .recontext import BATCH as RECONTEXT_BATCH
from .recontext import recontext
from .search import VectorIndex
from .storing import Placed, Stored, place_knowledge

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder
    from .memory import Memory

log = logging.getLogger(__name__)
MAX_BATCH = 64  # requests a transaction: bounds the model call (~0.2 s for 64 short texts)
ATTEMPTS = 3  # a batch that meets a database error is tried this many times
RETRY_PAUSE = 0.05  # seconds before the second attempt, four times that before the third
RECONTEXT_IDLE = 0.2  # seconds without a store before provisional vectors are replaced
RECONTEXT_BACKLOG = 256  # provisional vectors after which they are replaced even while busy
CLOSE_WAIT = 10.0  # seconds the in-process server's writer may take to drain at exit


class GroupWriteFailed(LoreError):
    """The database refused the batch, even after retries, or the writer is closed."""


# A request, its caller's future, and its placement query's text and vector (stage one).
_Pending = tuple[StoreRequest, "Future[Stored]", tuple[str, Any] | None]


class GroupWriter:
    """The single writer. `store_factory` opens its writable Store (called on its thread);
    `index` is the vector index to keep current (the caller's, so that one copy serves the
    queries too), else it keeps its own."""

    def __init__(self, store_factory: Callable[[], Store], embedder: Embedder | None, *,
                 index: VectorIndex | None = None, clock: Callable[[], float] = time.time,
                 project: str | None = None, tz: tzinfo | None = None,
                 max_batch: int = MAX_BATCH) -> None:
        self.store_factory = store_factory
        self.embedder = embedder
        self.index = index
        self.clock = clock
        self.project = project
        self.tz = tz
        self.max_batch = max_batch
        self.batches: list[int] = []  # sizes of the batches written, for tests and benchmarks
        self.model_calls = 0  # for the stores themselves; recontext_calls for the vectors after
        self.recontext_calls = 0
        # Seconds spent in each step, summed (the benchmark's profile): the placement queries'
        # model calls, then the writer's placement, model call, checks and inserts, commit.
        self.timings: dict[str, float] = dict.fromkeys(
            ("embed_queries", "place", "embed_texts", "keep", "commit", "recontext"), 0.0)
        self._recontext_due = 1  # provisional vectors known to wait (1: look once, at idle)
        self._incoming: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        # Groups handed on whole, so the writer never takes half of one.
        self._queue: queue.SimpleQueue[list[_Pending] | None] = queue.SimpleQueue()
        self._counting = threading.Lock()
        self._queued = 0  # submitted, not yet taken by the writer
        self._ready = 0  # of those, embedded and waiting for the writer
        self._accepting = threading.Lock()
        self._closed = False
        self._store: Store | None = None
        # numpy before the threads: both import it, and two threads importing it at once can
        # see it half-initialised (server/tools.py main() says the same).
        import numpy  # noqa: F401

        self._embedding = threading.Thread(target=self._run_embedding, daemon=True,
                                           name="lore-group-embed")
        self._thread = threading.Thread(target=self._run, name="lore-group-writer", daemon=True)
        self._embedding.start()
        self._thread.start()

    # -- callers -----------------------------------------------------------------------
    def submit(self, content: str, summary: str, parent_id: str | None = None, depth: int = 2,
               source: str = "agent", importance: float = 0.6,
               project: str | None = None) -> Stored:
        """Stores one piece of knowledge as store_knowledge does, grouped with whatever else
        is being stored; returns once it is committed, or raises what it raised."""
        return self.submit_request(StoreRequest(content, summary, parent_id, depth, source,
                                                importance, project)).result()

    def submit_request(self, request: StoreRequest) -> Future[Stored]:
        """Queues the request; the future answers once it is committed."""
        done: Future[Stored] = Future()
        with self._accepting:
            if self._closed:
                raise GroupWriteFailed("the memory's writer is closed")
            with self._counting:
                idle = self._queued == 0
                self._queued += 1
                if idle:  # nothing ahead of it anywhere: straight to the writer, which embeds
                    self._ready += 1  # its query itself (one thread hand-off less alone)
                    self._queue.put([(request, done, None)])
            if not idle:
                self._incoming.put((request, done, None))
        return done

    @property
    def queued(self) -> int:
        """Requests submitted and not yet taken into a batch by the writer."""
        return self._queued

    @property
    def ready(self) -> int:
        """Of those, the ones past the first stage, waiting for the writer."""
        return self._ready

    def close(self, timeout: float | None = None) -> None:
        """Drains: what was submitted is written and answered, then the threads end."""
        with self._accepting:
            if not self._closed:
                self._closed = True
                self._incoming.put(None)
        self._embedding.join(timeout)
        self._thread.join(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the two stages ------------------------------------------------------------------
    @staticmethod
    def _take(source: queue.SimpleQueue[_Pending | None], most: int
              ) -> tuple[list[_Pending], bool]:
        """What is queued (waiting for the first), at most `most`; and whether the end came."""
        first = source.get()
        if first is None:
            return [], True
        taken = [first]
        while len(taken) < most:
            try:
                more = source.get_nowait()
            except queue.Empty:
                break
            if more is None:
                return taken, True
            taken.append(more)
        return taken, False

    def _run_embedding(self) -> None:
        """Stage one: the placement queries of what is queued, embedded in one model call
        while the writer is busy with the batch before (the model and SQLite both work
        outside the GIL, so the two stages share two cores)."""
        stopping = False
        while not stopping:
            taken, stopping = self._take(self._incoming, self.max_batch)
            ahead = self._embed_queries([request for request, _, _ in taken])
            if taken:
                with self._counting:
                    self._ready += len(taken)
                self._queue.put([(request, done, vector)
                                 for (request, done, _), vector in zip(taken, ahead)])
        self._queue.put(None)

    def _embed_queries(self, requests: list[StoreRequest]) -> list[tuple[str, Any] | None]:
        out: list[tuple[str, Any] | None] = [None] * len(requests)
        if self.embedder is None or not requests:
            return out
        try:
            asked = {i: query_words(r, self.clock, self.tz) for i, r in enumerate(requests) if placed_here(r)}
            if not asked or not getattr(self.embedder, "available", True):
                return out
            started = time.perf_counter()
            vectors = self.embedder.embed(list(asked.values()))
            self.timings["embed_queries"] += time.perf_counter() - started
            self.model_calls += 1
        except Exception:  # noqa: BLE001 - the writer embeds them (or logs why it cannot)
            return out
        for (i, words), vector in zip(asked.items(), vectors):
            out[i] = (words, vector)
        return out

    def _run(self) -> None:
        """Stage two: the writer; and, when no store waits, provisional vectors replaced."""
        stopping = False
        while not stopping:
            group = self._next_group()
            if group is None:
                break
            batch = list(group)
            while len(batch) < self.max_batch:  # what else is ready (bounded by a group)
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                    break
                batch.extend(more)
            with self._counting:
                self._queued -= len(batch)
                self._ready -= len(batch)
            self._write(batch)
        if self._store is not None:
            self._store.close()
            self._store = None

    def _next_group(self) -> list[_Pending] | None:
        while self._recontext_due:
            if self._recontext_due < RECONTEXT_BACKLOG:  # past it, catch up even when busy
                try:  # a caller storing one fact after another is not made to wait for it
                    return self._queue.get(timeout=RECONTEXT_IDLE)
                except queue.Empty:
                    if self._queued:  # stage one is embedding the next group: not idle
                        continue
            self._recontext_some()
        return self._queue.get()

    def _recontext_some(self) -> None:
        if self.embedder is None or not getattr(self.embedder, "available", True):
            self._recontext_due = 0
            return
        try:
            store = self._writable()
            started = time.perf_counter()
            done = recontext(store, self.embedder, self.index)
            self.timings["recontext"] += time.perf_counter() - started
            self.recontext_calls += done > 0
            self._recontext_due = 0 if done < RECONTEXT_BATCH else max(self._recontext_due - done, 1)
        except Exception as exc:  # noqa: BLE001 - left marked: the next writer or warm-up retries
            log.warning("could not replace provisional vectors: %s", exc)
            self._drop_store()
            self._recontext_due = 0

    def _writable(self) -> Store:
        if self._store is None:
            self._store = self.store_factory()
        if self.index is None:
            from ..embedding.vector_snapshot import snapshot_path

            self.index = VectorIndex(snapshot_path(self._store.path))
        return self._store

    def _write(self, batch: list[_Pending]) -> None:
        for attempt in range(ATTEMPTS):
            try:
                results = self._write_once(batch)
            except (DatabaseError, StoreError) as exc:
                log.warning("group commit of %d store(s) failed (attempt %d/%d): %s",
                            len(batch), attempt + 1, ATTEMPTS, exc)
                self._drop_store()  # a fresh connection for the next attempt
                if attempt + 1 < ATTEMPTS:
                    time.sleep(RETRY_PAUSE * 4**attempt)
                    continue
                failure = GroupWriteFailed(f"memory is busy or unwritable, nothing was stored "
                                           f"({exc}); try again in a moment")
                for _, done, _ in batch:
                    done.set_exception(failure)
                return
            except BaseException as exc:  # a bug: every caller hears of it, the thread lives
                log.exception("group commit failed")
                self._drop_store()
                for _, done, _ in batch:
                    done.set_exception(exc)
                return
            crash_point("group-after-commit")
            self.batches.append(len(batch))
            for (_, done, _), result in zip(batch, results):
                if isinstance(result, BaseException):
                    done.set_exception(result)
                else:
                    done.set_result(result)
            return

    def _drop_store(self) -> None:
        if self._store is not None:
            try:
                self._store.close()
            except Exception:  # noqa: BLE001 - already broken; a new one is opened
                pass
            self._store = None

    def _write_once(self, batch: list[_Pending]) -> list[Stored | BaseException]:
        """One transaction for the batch: placement of each request in turn, one model call
        for the texts that cannot keep their placement query's vector for now (a parent
        given, a topic), then each near-duplicate check and insert in turn."""
        requests = [request for request, _, _ in batch]
        store = self._writable()
        assert self.index is not None
        outcome: list[Stored | BaseException | None] = [None] * len(requests)
        placed: list[Placed | None] = [None] * len(requests)
        embedder = None if self.embedder is None else PrefilledEmbedder(self.embedder)
        words = [query_words(r, self.clock, self.tz) if placed_here(r) else None for r in requests]
        # The queries' model call comes before the transaction; the texts' call runs inside it
        # (their parents are known only there), so the lock is held for one batched call.
        if embedder is not None:
            started = time.perf_counter()
            embedder.known.update(ahead for _, _, ahead in batch if ahead is not None)
            embedder.prefill([w for w, (_, _, ahead) in zip(words, batch)
                              if ahead is None and w is not None])
            self.timings["embed_queries"] += time.perf_counter() - started
        with store.write():
            view = BatchIndex(self.index, store, [] if embedder is None else [
                embedder.known[w] for w in dict.fromkeys(words) if w in embedder.known])
            memory = BatchMemory(store, view, embedder, self.clock, self.tz)
            marks = [time.perf_counter()]
            for i, request in enumerate(requests):
                memory.project = request.project or self.project
                step = partial(place_knowledge, memory, request.content, request.summary,
                               request.parent_id, request.depth, request.source,
                               request.importance)
                result = alone(store, view, step)
                if isinstance(result, Placed):
                    placed[i] = result
                else:
                    outcome[i] = result
            # One model run a placed store: it keeps its placement query's vector for now
            # (recontext.py gives it its text's under its parent later). The rest (a parent
            # given, a topic) and any that could repeat a sibling get theirs now.
            ahead = [None if p is None or embedder is None or w is None
                     else embedder.known.get(w) for p, w in zip(placed, words)]
            if embedder is not None:
                marks.append(time.perf_counter())
                embedder.prefill([p.text for p, a in zip(placed, ahead)
                                  if p is not None and a is None])
            marks.append(time.perf_counter())
            for i, one in enumerate(placed):
                if one is not None:
                    memory.project = requests[i].project or self.project
                    outcome[i] = alone(store, view, partial(keep, memory, one, ahead[i]))
                    if getattr(outcome[i], "provisional", False):
                        self._recontext_due += 1
            if embedder is not None:
                self.model_calls += embedder.model_calls
            crash_point("group-before-commit")
            marks.append(time.perf_counter())
        marks.append(time.perf_counter())
        if len(marks) == 5:  # with a model: place, embed, keep, commit
            for name, (start, end) in zip(("place", "embed_texts", "keep", "commit"),
                                          zip(marks, marks[1:])):
                self.timings[name] += end - start
        return [r if r is not None else InvalidInput("not stored") for r in outcome]


# -- the in-process MCP server's writer: one per Memory ----------------------------------
_writers: weakref.WeakKeyDictionary[Memory, GroupWriter] = weakref.WeakKeyDictionary()
_writers_lock = threading.Lock()


def group_writer(memory: Memory) -> GroupWriter:
    """The writer for this Memory's database, sharing its embedder and vector index; made on
    first use and closed (drained) when the Memory closes."""
    with _writers_lock:
        writer = _writers.get(memory)
        if writer is None or writer.closed:
            path = memory.db_path
            writer = GroupWriter(lambda: Store(path), memory.embedder, index=memory.index,
                                 clock=memory.clock, project=memory.project, tz=memory.tz)
            _writers[memory] = writer
            # Bounded: a batch stuck on a busy database must not hang the server's exit (what
            # it holds was never acknowledged, so nothing said to be stored is lost).
            memory.close_first(partial(writer.close, CLOSE_WAIT))
        return writer
