"""The memory as one group-commit batch sees it, inside its own write transaction: every read
goes through the writer's connection, so a request sees what the requests before it in the
batch wrote (two identical stores in one batch behave as they would one after the other);
the vector index is the shared one plus the batch's own rows, which reach the shared index
only once committed; and the model's vectors come from one batch computed ahead.

Used by group_commit.py only."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from ..core.errors import LoreError
from ..store import Store
from .memory import Memory
from .memory_base import CANDIDATES, KeywordHits
from .search import VectorIndex

if TYPE_CHECKING:
    import numpy as np

    from ..embedding.embedder import Embedder


class BatchIndex:
    """The shared index (committed rows only) and, beside it, the batch's uncommitted rows.
    The shared one is never fed a row that a rollback could take back: another thread
    searching it meanwhile, or after a failed batch, would find fragments that do not exist,
    and its (epoch, last row) bookkeeping would go wrong when the row ids are used again."""

    def __init__(self, shared: VectorIndex, store: Store, queries: Sequence[Any] = ()) -> None:
        # Inside the transaction before anything is written: what `store` sees is the latest
        # committed state, and no other writer can commit until this one does.
        shared.refresh(store)
        self.shared = shared
        self.start = store.vector_epoch()
        self.tail = VectorIndex.appended_after(self.start)
        # The batch's placement searches of the shared index, all in one matrix product:
        # it does not change until the commit, so each answer holds for the whole batch.
        self._primed: dict[bytes, list[tuple[str, float]]] = {}
        if queries:  # as Memory._query asks: CANDIDATES at any depth, no time window
            import numpy as np

            unique = list({q.tobytes(): q for q in queries}.values())
            found = shared.search_batch(np.stack(unique), CANDIDATES, None, [None])
            self._primed = {q.tobytes(): hits[0] for q, hits in zip(unique, found)}

    def restart_tail(self) -> None:
        """After a request's savepoint was rolled back: its rows are gone, and ids reused."""
        self.tail = VectorIndex.appended_after(self.start)

    def refresh(self, store: Store) -> None:
        if store.vector_epoch()[0] != self.start[0]:  # storing never bumps it; guard anyway
            raise LoreError("the vectors changed under a group-commit batch")
        self.tail.refresh(store)

    def load_dates(self, store: Store) -> None:
        self.shared.load_dates(store)
        self.tail.load_dates(store)

    def search_many(self, query: np.ndarray, k: int, depth: int | None,
                    windows: list[tuple[float, float] | None]) -> list[list[tuple[str, float]]]:
        """The best k of both: each side's own best k hold the best k of the union."""
        primed = (self._primed.get(query.tobytes())
                  if depth is None and windows == [None] and k == CANDIDATES
                  else None)
        shared = [primed] if primed is not None else self.shared.search_many(query, k, depth,
                                                                              windows)
        tail = self.tail.search_many(query, k, depth, windows)
        return [sorted(a + b, key=lambda hit: -hit[1])[:k] for a, b in zip(shared, tail)]

    def search(self, query: np.ndarray, k: int, depth: int | None = None,
               window: tuple[float, float] | None = None) -> list[tuple[str, float]]:
        return self.search_many(query, k, depth, [window])[0]

    def similarities(self, query: np.ndarray, wanted: Any) -> dict[str, float]:
        asked = list(wanted)
        return {**self.shared.similarities(query, asked), **self.tail.similarities(query, asked)}


class PrefilledEmbedder:
    """The real embedder, with the vectors of texts embedded ahead in one batch: a text
    asked for again is answered from them, any other goes to the model. A text's vector from
    a batch is the one it gets alone (the padding is masked; measured with the shipped
    model: largest difference 0.0 over 32 texts of one to 120 words), so batching changes no
    near-duplicate decision."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.known: dict[str, Any] = {}
        self.model_calls = 0  # for the benchmark's profile

    @property
    def available(self) -> bool:
        return bool(getattr(self.embedder, "available", True))

    def prefill(self, texts: list[str]) -> None:
        """One model call for all of `texts` not known yet. A failure leaves them unknown:
        each is then asked for alone and fails (or not) as it would have by itself."""
        new = list(dict.fromkeys(t for t in texts if t not in self.known))
        if not new or not self.available:
            return
        try:
            vectors = self.embedder.embed(new)
        except Exception:  # noqa: BLE001 - Memory.embed_one logs the failure when asked again
            return
        self.model_calls += 1
        self.known.update(zip(new, vectors))

    def embed(self, texts: list[str]) -> Any:
        self.prefill(texts)
        missing = [t for t in texts if t not in self.known]
        if missing:  # the model failed above: asked again, it raises what Memory logs
            self.known.update(zip(missing, self.embedder.embed(missing)))
            self.model_calls += 1
        import numpy as np

        return np.stack([self.known[t] for t in texts])


class BatchMemory(Memory):
    """A Memory whose reader, writer and keyword search are all the batch's one connection,
    with the batch's index and embedder. It belongs to the writer thread, for one batch."""

    def __init__(self, store: Store, index: BatchIndex, embedder: PrefilledEmbedder | None,
                 clock: Any, tz: Any) -> None:
        super().__init__(store.path, cast("Embedder", embedder), clock, None, tz)
        self._writer = self._reader = self._keyword_store = store
        self._index = cast(VectorIndex, index)  # it answers the methods recall calls

    def _start_keyword_search(self, expr: str) -> Future[KeywordHits]:
        # Not on another thread: one apsw connection refuses two threads at once, and only
        # this connection sees the batch's own rows.
        done: Future[KeywordHits] = Future()
        done.set_result(self._keyword_search(expr))
        return done

    def close(self) -> None:  # the connection is the group writer's
        self._writer = self._reader = self._keyword_store = None
