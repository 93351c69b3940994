"""Group commit for store_memory: one writer thread takes every store queued meanwhile,
embeds their texts together and writes them in one transaction.

Storing one fact alone costs two runs of the model (its placement query, then its text in
the context of its parent) and one transaction; a batch of n pays one model call over the n
placement queries and one transaction before its answers, a placed fact keeping its query's
vector until the writer, once idle, gives it the other (recontext.py). The rules are
store_knowledge's own (storing.place_knowledge and keep_placed), applied in the order the
requests arrived, and each request reads what the ones before it in the batch wrote
(group_view.BatchMemory): two identical stores in one batch give one fact and one
duplicate, as they would one after the other. Idle, the writer also fills the cue vectors
of what was stored with cues (writer_idle.py), after the answers.

Every request is first accepted into the store journal (store_journal.py: checked, redacted,
its id reserved, one transaction for all queued meanwhile); the writer then places journal
rows in their order and inserts each fragment under its reserved id (a repeat: a redirect of
that id to the fragment it repeats), and deletes the rows once that is committed.

What a caller can count on:
- `accept` answers once the request is durable in the journal (no model run); `submit` and
  `submit_request`'s future once it is placed and committed, with the same `Stored` that
  store_knowledge gives.
- A request that fails on its own fails alone (refused at acceptance, or its savepoint
  rolled back); the rest of its batch is written.
- A database error fails the whole batch, which is retried from scratch; failing again, its
  callers get GroupWriteFailed and its rows, still in the journal, are handed on again later.
- A crash loses nothing accepted: whoever starts a writer next places the journal's rows
  first, and a row whose id the database already holds is not placed twice.
The service (one writer for every session) and the in-process MCP server both use it."""

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import LoreError
from ..core.faults import crash_point
from ..store import DatabaseError, Store, StoreError
from ..store.journal import StoreJournal, journal_path
from .group_batch import Pending as _Pending
from .group_batch import write_parts
from .group_requests import StoreRequest, placed_here, query_words, take
from .search import VectorIndex
from .store_journal import Accepted, Acceptor
from .storing import Stored
from .writer_idle import idle_round

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder
    from .memory import Memory

log = logging.getLogger(__name__)
MAX_BATCH = 64  # requests a transaction: bounds the model call (~0.2 s for 64 short texts)
ATTEMPTS = 3  # a batch that meets a database error is tried this many times
RETRY_PAUSE = 0.05  # seconds before the second attempt, four times that before the third
RECONTEXT_IDLE = 0.2  # seconds without a store before provisional vectors are replaced
RECONTEXT_BACKLOG = 256  # provisional vectors after which they are replaced even while busy
RETRY_LATER = 5.0  # seconds before journal rows the database refused are placed again
CLOSE_WAIT = 10.0  # seconds the in-process server's writer may take to drain at exit


class GroupWriteFailed(LoreError):
    """The database refused the batch, even after retries, or the writer is closed."""


class GroupWriter:
    """The single writer. `store_factory` opens its writable Store (called on its thread);
    `index` is the vector index to keep current (the caller's, so that one copy serves the
    queries too), else it keeps its own."""

    def __init__(self, store_factory: Callable[[], Store], embedder: Embedder | None, *,
                 index: VectorIndex | None = None, clock: Callable[[], float] = time.time,
                 project: str | None = None, tz: tzinfo | None = None,
                 max_batch: int = MAX_BATCH, journal: Path | None = None) -> None:
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
            ("embed_queries", "place", "embed_texts", "keep", "commit", "recontext",
             "cue_vectors"), 0.0)
        self.recontext_due = 1  # provisional vectors known to wait (1: look once, at idle)
        self.cues_due = True  # cue vectors may be due (writer_idle.py): look once, at idle
        self._incoming: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        # Groups handed on whole, so the writer never takes half of one.
        self._queue: queue.SimpleQueue[list[_Pending] | None] = queue.SimpleQueue()
        self._counting = threading.Lock()
        self._queued = 0  # submitted, not yet taken by the writer
        self._ready = 0  # of those, embedded and waiting for the writer
        self._accepting = threading.Lock()
        self._closed = False
        self._store: Store | None = None
        self._journal: StoreJournal | None = None  # the writer thread's connection
        # Read-your-writes: the last journal seq handed to the writer, and placed.
        self.accepted_seq = self.placed_seq = 0
        self._placing = threading.Condition()
        # numpy before the threads: both import it, and two threads importing it at once can
        # see it half-initialised (server/tools.py main() says the same).
        import numpy  # noqa: F401

        self._embedding = threading.Thread(target=self._run_embedding, daemon=True,
                                           name="lore-group-embed")
        self._thread = threading.Thread(target=self._run, name="lore-group-writer", daemon=True)
        self._embedding.start()
        self._thread.start()
        probe = store_factory()  # where the database is (the journal lies beside it)
        self.db_path = probe.path
        probe.close()
        self.journal_path = journal or journal_path(self.db_path)
        self.acceptor = Acceptor(self.journal_path, self.db_path, self._hand_on, clock)

    # -- callers -----------------------------------------------------------------------
    def submit(self, content: str, summary: str, parent_id: str | None = None, depth: int = 2,
               source: str = "agent", importance: float = 0.6,
               project: str | None = None) -> Stored:
        """Stores one piece of knowledge as store_knowledge does, grouped with whatever else
        is being stored; returns once it is committed, or raises what it raised."""
        return self.submit_request(StoreRequest(content, summary, parent_id, depth, source,
                                                importance, project)).result()

    def submit_request(self, request: StoreRequest) -> Future[Stored]:
        """Queues the request; the future answers once it is placed and committed."""
        return self._submit(request)[1]

    def accept(self, request: StoreRequest) -> Future[Accepted]:
        """Queues the request; the future answers once it is durable in the store journal."""
        return self._submit(request)[0]

    def _submit(self, request: StoreRequest) -> tuple[Future[Accepted], Future[Stored]]:
        with self._accepting:
            if self._closed:
                raise GroupWriteFailed("the memory's writer is closed")
            return self.acceptor.submit(request)

    def _hand_on(self, items: list[tuple[StoreRequest, Future[Stored]]]) -> bool:
        """Accepted requests, in journal order, to the writer; whether it was idle."""
        with self._counting:
            idle = self._queued == 0
            self._queued += len(items)
            if idle:  # nothing ahead of them anywhere: straight to the writer, which embeds
                self._ready += len(items)  # their queries itself (one hand-off less)
                for start in range(0, len(items), self.max_batch):  # a group is taken whole
                    self._queue.put([(request, done, None)
                                     for request, done in items[start:start + self.max_batch]])
            self.accepted_seq = max([self.accepted_seq, *(r.seq or 0 for r, _ in items)])
        if not idle:
            for request, done in items:
                self._incoming.put((request, done, None))
        return idle

    def wait_accepted(self, timeout: float) -> bool:
        """Waits until an earlier process's journal rows are handed on (accepted_seq)."""
        return self.acceptor.replayed.wait(timeout)

    def wait_placed(self, seq: int, timeout: float) -> bool:
        """Waits (at most `timeout` s) until journal rows up to `seq` are placed."""
        with self._placing:
            return self._placing.wait_for(lambda: self.placed_seq >= seq, timeout)

    def _placed_through(self, batch: list[_Pending]) -> None:
        with self._placing:
            self.placed_seq = max([self.placed_seq, *(r.seq or 0 for r, _, _ in batch)])
            self._placing.notify_all()

    @property
    def queued(self) -> int:
        """Requests submitted and not yet taken into a batch by the writer."""
        return self._queued

    @property
    def ready(self) -> int:
        """Of those, the ones past the first stage, waiting for the writer."""
        return self._ready

    def close(self, timeout: float | None = None) -> None:
        """Drains: what was submitted is written and answered, then the threads end (what a
        timeout leaves in the journal, the next writer places)."""
        with self._accepting:
            if not self._closed:
                self._closed = True
                self.acceptor.close(timeout)
                self._incoming.put(None)
        self._embedding.join(timeout)
        self._thread.join(timeout)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the two stages ------------------------------------------------------------------
    def _run_embedding(self) -> None:
        """Stage one: the placement queries of what is queued, embedded in one model call
        while the writer is busy with the batch before (the model and SQLite both work
        outside the GIL, so the two stages share two cores)."""
        stopping = False
        while not stopping:
            taken, stopping = take(self._incoming, self.max_batch)
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
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def _next_group(self) -> list[_Pending] | None:
        while self.recontext_due or self.cues_due:
            if self.recontext_due < RECONTEXT_BACKLOG:  # past it, catch up even when busy
                try:  # a caller storing one fact after another is not made to wait for it
                    return self._queue.get(timeout=RECONTEXT_IDLE)
                except queue.Empty:
                    if self._queued:  # stage one is embedding the next group: not idle
                        continue
            idle_round(self)
        return self._queue.get()

    def writable(self) -> Store:
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
                self.drop_store()  # a fresh connection for the next attempt
                if attempt + 1 < ATTEMPTS:
                    time.sleep(RETRY_PAUSE * 4**attempt)
                    continue
                failure = GroupWriteFailed(f"memory is busy or unwritable, nothing was placed "
                                           f"({exc}); it stays in the store journal")
                self._placed_through(batch)  # still in the journal: handed on again later
                seqs = [r.seq for r, _, _ in batch if r.seq is not None]
                if seqs:
                    retry = threading.Timer(RETRY_LATER, self.acceptor.again, [max(seqs)])
                    retry.daemon = True
                    retry.start()
                for _, done, _ in batch:
                    done.set_exception(failure)
                return
            except BaseException as exc:  # a bug: every caller hears of it, the thread lives
                log.exception("group commit failed")
                self.drop_store()
                self._placed_through(batch)
                for _, done, _ in batch:
                    done.set_exception(exc)
                return
            crash_point("group-after-commit")
            self._forget(batch, results)
            self.batches.append(len(batch))
            for (_, done, _), result in zip(batch, results):
                if isinstance(result, BaseException):
                    done.set_exception(result)
                else:
                    done.set_result(result)
            return

    def _forget(self, batch: list[_Pending], results: list[Stored | BaseException]) -> None:
        """The placed rows (and those refused for good) out of the journal: their ids are in
        the database now, so a crash before this only makes the next writer skip them."""
        fids = [r.fid for r, _, _ in batch if r.fid is not None]  # none: placed directly
        try:
            if fids and self._journal is None:
                self._journal = StoreJournal(self.journal_path)
            if fids and self._journal is not None:
                self._journal.remove(fids)
        except StoreError as exc:  # left there: skipped as placed when next replayed
            log.warning("could not clear placed rows from the store journal: %s", exc)
        self._placed_through(batch)
        for (request, _, _), result in zip(batch, results):
            if isinstance(result, BaseException) and request.fid is not None:
                log.warning("store %s was accepted but could not be placed: %s",
                            request.fid, result)

    def drop_store(self) -> None:
        if self._store is not None:
            try:
                self._store.close()
            except Exception:  # noqa: BLE001 - already broken; a new one is opened
                pass
            self._store = None

    def _write_once(self, batch: list[_Pending]) -> list[Stored | BaseException]:
        results, provisional = write_parts(self, self.writable(), batch)
        self.recontext_due += provisional
        self.cues_due = self.cues_due or any(request.cues for request, _, _ in batch)
        return results


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


def running_writer(memory: Memory) -> GroupWriter | None:
    """This Memory's writer if one was made (and not closed): what read-your-writes waits on."""
    with _writers_lock:
        writer = _writers.get(memory)
    return None if writer is None or writer.closed else writer
