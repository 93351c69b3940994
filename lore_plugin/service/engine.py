"""One Memory behind the tools: one lock, busy retries, reconsolidation off the answer path,
and the warm-up that loads the model and the vector index. The memory service holds one of
these for the whole machine; the in-process MCP server (the fallback) holds its own."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ..core.config import Settings
from ..core.errors import LoreError
from ..core.heap import give_back
from ..recall.cue_vector_upkeep import fill_after_write
from ..recall.group_commit import group_writer
from ..recall.memory import Memory
from ..recall.recontext import recontext_all
from ..recall.spaces import Spaces
from ..store import BusyError, Store

log = logging.getLogger("lore.server")
T = TypeVar("T")

BUSY_ATTEMPTS = 3  # each attempt already waits out SQLite's busy timeout
BUSY_MESSAGE = ("memory is busy: another Lore process is writing to the database; "
                "try again in a moment")
BACKFILL_BATCH = 4  # small batches keep the model's memory arena (and peak RSS) small
WARM_CUE_NOTES = 256  # cue vectors filled at warm-up (~2 s); the writer fills the rest idle


class ToolFailure(LoreError):
    """A tool call that failed for a reason its caller can act on; the surfaces show it as a
    tool error (the MCP SDK's ToolError, or the front's is_error answer)."""


class Service:
    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.lock = threading.Lock()
        self._reinforcer = ThreadPoolExecutor(1, thread_name_prefix="lore-reinforce")
        self._reinforcing: Memory | None = None  # its own connections, used by that thread only
        self._writing_snapshot = threading.Lock()
        self.warm = threading.Event()  # warm-up done: the per-prompt hook may use the model
        # With a hub (spaced.attach): the spaces read, and the settings that route writes.
        self.spaces: Spaces | None = None
        self.settings: Settings | None = None

    def model_ready(self) -> None:
        """Waits for the embedding model outside the lock, so other tools are not held up."""
        self.memory.embedder_ready()

    def call(self, fn: Callable[[Memory], T], needs_model: bool = False,
             project: str | None = None) -> T:
        """`project`: the calling session's, for one service that serves several projects
        (ranking and the topic a store lands under); None keeps the Memory's own."""
        if needs_model:
            self.model_ready()
        for attempt in range(BUSY_ATTEMPTS):
            try:
                with self.lock:
                    if project is not None:
                        self.memory.project = project
                    return fn(self.memory)
            except BusyError as exc:
                log.warning("database busy (attempt %d/%d): %s", attempt + 1, BUSY_ATTEMPTS, exc)
                if attempt + 1 < BUSY_ATTEMPTS:
                    time.sleep(0.05 * 4**attempt)
            except ToolFailure:
                raise
            except LoreError as exc:
                raise ToolFailure(str(exc)) from exc
        raise ToolFailure(BUSY_MESSAGE)

    def reinforce_later(self, ids: list[str]) -> None:
        """Reconsolidation off the answer path: a busy database delays it, not the answer."""
        if ids:
            try:
                self._reinforcer.submit(self._reinforce, ids)
            except RuntimeError:  # shutting down: reinforcement is best effort
                pass

    def later(self, work: Callable[[], object]) -> None:
        """Other best-effort work off the answer path, on the same thread (in order)."""
        try:
            self._reinforcer.submit(work)
        except RuntimeError:  # shutting down
            pass

    def _reinforce(self, ids: list[str]) -> None:
        if self._reinforcing is None:
            m = self.memory
            self._reinforcing = Memory(m.db_path, None, m.clock, m.project)
        self._reinforcing.reinforce(ids)  # best effort: it logs and skips on failure

    def close(self) -> None:
        # A snapshot being written is let finish (0.1 s at 100K): a one-question session would
        # otherwise never leave one, and every next server would read SQLite again.
        if self._writing_snapshot.acquire(timeout=2):
            self._writing_snapshot.release()
        self._reinforcer.shutdown(wait=True, cancel_futures=True)
        if self._reinforcing is not None:
            self._reinforcing.close()
        if self.lock.acquire(timeout=2):  # a call stuck on a busy database must not hang exit
            self.memory.close()

    def _load_index(self) -> None:
        try:
            store = Store(self.memory.db_path, readonly=True)
            try:
                self.memory.index.refresh(store)
            finally:
                store.close()
        except Exception:  # the first query loads it instead
            log.exception("loading the vector index failed")
            return
        self._save_snapshot()  # now, not after warm-up: a short session may end before that
        give_back()  # what the load from SQLite and the swap for the snapshot left in the heap

    def _save_snapshot(self) -> None:
        with self._writing_snapshot:
            try:
                started = time.perf_counter()
                store = Store(self.memory.db_path, readonly=True)
                try:
                    if self.memory.index.save_snapshot(store):
                        log.info("vector snapshot written in %.2f s",
                                 time.perf_counter() - started)
                finally:
                    store.close()
            except Exception as exc:  # only a cache: the next server reads SQLite instead
                log.warning("could not write the vector snapshot: %s", exc)

    def warm_up(self) -> None:
        """Loads the model, embeds what was stored without one, and loads the vector index.
        Best effort: a failure only means the first query does the loading."""
        marks = [time.perf_counter()]
        try:
            # numpy first, on one thread: onnxruntime and the index both import it, and two
            # threads importing it at once can see it half-initialised and fail (main() has
            # imported it already; this covers in-process users such as the benchmarks).
            import numpy  # noqa: F401

            # The model's one-time optimisation first, alone: its peak (208 MB) beside the
            # index's load set the service's peak at 100K (349 MB; LocalEmbedder.prepare).
            prepare = getattr(self.memory.embedder, "prepare", None)
            if prepare is not None:
                prepare()
            # The vector index loads from its own connection while the model loads here:
            # both spend most of their time outside the GIL, so the first query waits for
            # the slower of the two rather than their sum.
            loader = threading.Thread(target=self._load_index, name="lore-index", daemon=True)
            loader.start()
            self.model_ready()
            marks.append(time.perf_counter())
            loader.join()
            filler = Memory(self.memory.db_path, self.memory.embedder, self.memory.clock)
            try:
                done = filler.backfill_embeddings(batch=BACKFILL_BATCH)
                # Vectors a crash left provisional (recall/recontext.py), this index patched.
                if filler.embedder_ready():
                    done += recontext_all(filler.writer, filler.embedder,  # type: ignore[arg-type]
                                          self.memory.index)
                    # Cues given while no service ran (ingestion, `lore remember`, an
                    # import, a migration): some, so a backlog does not hold up warm-up; the
                    # writer fills the rest when idle.
                    fill_after_write(filler.writer, filler.embedder,  # type: ignore[arg-type]
                                     "the local memory", most=WARM_CUE_NOTES)
                filler.date_backlog()
            finally:
                filler.close()
            # Stores an earlier service accepted but did not place (a crash, an exit that did
            # not drain): its writer places the store journal's rows before any new one.
            group_writer(self.memory)
            marks.append(time.perf_counter())
            with self.lock:
                self.memory.search("warm up", limit=1, mode="vector")
            marks.append(time.perf_counter())
            log.info("warm in %.2f s: model %.2f s, %d backfilled in %.2f s, index %.2f s",
                     marks[3] - marks[0], marks[1] - marks[0], done, marks[2] - marks[1],
                     marks[3] - marks[2])
        except Exception:
            log.exception("warm-up failed; the first query will load what it needs")
