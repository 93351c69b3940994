"""What the memory engine is built on: its connections (a read-only reader, a writer for
short transactions), the embedder, the shared limits and value types, and argument checks.
memory.Memory adds retrieval and navigation, memory_writes.Writes reinforcement and stores."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import Any

from ..core import relevance as rel
from ..core.errors import InvalidInput
from ..core.types import Fragment, ScoredFragment
from ..embedding.embedder import Embedder
from ..embedding.vector_snapshot import snapshot_path
from ..store import Store
from .database_vectors import DatabaseVectors
from .search import VectorIndex

log = logging.getLogger(__name__)
Clock = Callable[[], float]
CANDIDATES = 100
KEYWORD_CANDIDATES = 100
COVERAGE_FROM = 20  # best keyword matches whose tokens measure the query's coverage (the
# maximum is what counts, and the best BM25 matches hold most)
PROJECT_BOOST = 1.1  # see CLEAR_LEAD
BROUGHT_DOWN = 0.5  # share of a matching branch's score its descendants get (see bench/README)
MAX_LIMIT = 100
MAX_DEPTH = 8
PLACEMENT_SIMILARITY = 0.3  # auto-placement needs a real semantic neighbour
MIN_SIMILARITY = 0.15  # below this a vector hit is noise, unless keywords also match
SPREAD = 0.3  # share of a match's score lent to its temporal neighbours
SPREAD_FROM = 20  # how many of the best matches lend
SPREAD_TO = 0.3  # own match (fused, 0..1) from which a neighbour takes the full loan
TIME_FLOOR = 0.1  # weight of a fragment far outside the time the query names
TIME_EPSILON = 0.2  # lets the named time alone order fragments that match no words
# Relevance (what is used and recent) and the current project break near-ties; together they
# can move a fragment by less than CLEAR_LEAD, so a match that much better always ranks first
# (issue 16): PROJECT_BOOST / (1 - RELEVANCE_WEIGHT) = 1.375. Near-ties in tests/recall/test_memory.py
# are 8-9 % apart, so neither factor can be much smaller.
CLEAR_LEAD = 1.4
RELEVANCE_WEIGHT = 0.2


def embedding_text(summary: str, content: str, parent_summary: str | None = None) -> str:
    """Contextual text: a fact embeds better with the name of the branch it belongs to."""
    body = summary if not content or content == summary else f"{summary}. {content}"
    return f"{parent_summary}: {body}" if parent_summary else body


@dataclass(frozen=True)
class KeywordHits:
    scores: dict[str, float]  # BM25, larger is better
    rows: dict[str, Fragment]  # without text
    tokens: dict[str, frozenset[str]]  # of the COVERAGE_FROM best matches


@dataclass(frozen=True)
class Recall:
    fragments: list[ScoredFragment]
    keyword_only: bool  # True when no embedding model was available


class MemoryBase:
    def __init__(self, db_path: Path | str | Any, embedder: Embedder | None,
                 clock: Clock = time.time, project: str | None = None,
                 tz: tzinfo | None = None) -> None:
        # A path is a SQLite file, opened here. A store object instead (a hub space,
        # hub.HubStore) serves every connection below and stays its caller's to close; when
        # it offers vector_search, the database answers vector queries (DatabaseVectors).
        self._given: Any = None
        if isinstance(db_path, str | os.PathLike):
            self.db_path = Path(db_path)
        else:
            self._given = db_path
            self.db_path = Path(getattr(db_path, "path", "") or f"hub-{db_path.space}")
        self.tz = tz  # for dates named in queries; None is the local time zone
        self.embedder = embedder
        self.clock = clock
        self.project = project
        self._index: VectorIndex | None = None
        self._writer: Store | None = None
        self._reader: Store | None = None
        # Keyword search runs on its own connection and thread while the query is embedded
        # and scanned: sqlite, onnxruntime and numpy all release the GIL, so on two cores the
        # slowest stage sets the latency rather than the sum of them.
        self._keyword_store: Store | None = None
        self._keyword_pool: ThreadPoolExecutor | None = None
        self._closers: list[Callable[[], None]] = []  # see close_first
        # A store across a network (a hub space) reinforces on this thread after the answer
        # is returned: its reads and its write are round trips the answer need not wait for.
        # The next read through this Memory waits for it (settle), so each query still sees
        # every earlier one's reinforcement, as with SQLite; close() waits for it too.
        self._reinforce_pool: ThreadPoolExecutor | None = None
        self._reinforcing: Future[None] | None = None
        # The last text embed_one embedded and its vector: the per-prompt selection asks for
        # the prompt's vector after search has embedded it (20-40 ms on a busy machine).
        self._last_vector: tuple[str, Any] | None = None

    @property
    def index(self) -> VectorIndex:
        """Made on first use: the SessionStart brief reads topics only, and the index would
        import numpy (~0.1 s) for nothing."""
        if self._index is None:
            if hasattr(self._given, "vector_search"):
                self._index = DatabaseVectors(self._given)
            else:
                self._index = VectorIndex(snapshot_path(self.db_path))
        return self._index

    # -- connections --------------------------------------------------------------------
    @property
    def writer(self) -> Store:
        if self._writer is None:
            self._writer = self._given or Store(self.db_path)
        return self._writer

    @property
    def reader(self) -> Store:
        self.settle()
        if self._reader is None:  # a read-only Store creates or migrates the file first if needed
            self._reader = self._given or Store(self.db_path, readonly=True)
        return self._reader

    def close_first(self, closer: Callable[[], None]) -> None:
        """Something to end before the connections close: the group writer
        (group_commit.group_writer), which drains its queue into the database first."""
        self._closers.append(closer)

    def keyword_store(self) -> Store:
        """The keyword thread's own connection (see memory.Memory._keyword_search)."""
        if self._keyword_store is None:
            self._keyword_store = self._given or Store(self.db_path, readonly=True)
        return self._keyword_store

    def settle(self) -> None:
        """Waits for the reinforcement of the last answer if it is still being written."""
        pending = self._reinforcing
        if pending is not None:
            pending.result()  # reinforce() logs and swallows its own failures
            self._reinforcing = None

    def after_answer(self, work: Callable[[], None]) -> None:
        """`work` (a reinforcement) now on this thread, or, for a store across a network,
        on the reinforcement thread once the answer is on its way (see __init__)."""
        if not getattr(self._given, "remote", False):
            work()
            return
        if self._reinforce_pool is None:
            self._reinforce_pool = ThreadPoolExecutor(max_workers=1,
                                                      thread_name_prefix="lore-reinforce")
        self._reinforcing = self._reinforce_pool.submit(work)

    @contextlib.contextmanager
    def session(self, store: Any) -> Iterator[None]:
        """One connection for this thread's reads of a store that lends them from a pool
        (hub.HubStore.session); nothing for SQLite, whose connections are its own."""
        with getattr(store, "session", contextlib.nullcontext)():
            yield

    def close(self) -> None:
        if self._reinforce_pool is not None:
            self._reinforce_pool.shutdown(wait=True)  # the last reinforcement is written
            self._reinforce_pool = None
        closers, self._closers = self._closers, []
        for closer in closers:
            closer()
        if self._keyword_pool is not None:
            self._keyword_pool.shutdown(wait=True)
        for store in (self._reader, self._writer, self._keyword_store):
            if store is not None and store is not self._given:
                store.close()
        self._reader = self._writer = self._keyword_store = None
        self._keyword_pool = None

    def embedder_ready(self) -> bool:
        return self.embedder is not None and getattr(self.embedder, "available", True)

    def embed_one(self, text: str) -> Any | None:
        if not self.embedder_ready():
            return None
        last = self._last_vector
        if last is not None and last[0] == text:
            return last[1]
        try:
            vector = self.embedder.embed([text])[0]  # type: ignore[union-attr]
        except Exception as exc:  # a broken model degrades to keyword search
            log.warning("embedding failed, keyword search only: %s", exc)
            return None
        self._last_vector = (text, vector)
        return vector

    def resolve(self, fid: str) -> str:
        return self.reader.resolve_id(fid)

    def get(self, fid: str) -> Fragment:
        return self.reader.get(self.resolve(fid))

    def query(self, topic: str, depth: int = 1, limit: int = 10,
              include_superseded: bool = False, reinforce: bool = True) -> Recall:
        raise NotImplementedError  # memory.Memory, the retrieval engine, answers


def _check_text(value: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be non-empty text")
    return value.strip()


def _check_range(value: int, name: str, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an integer from {low} to {high}, got {value!r}")


def _state(frag: Fragment) -> rel.MemoryState:
    return rel.MemoryState(frag.access_count, frag.decay_rate, frag.last_accessed,
                           frag.last_reinforced)
