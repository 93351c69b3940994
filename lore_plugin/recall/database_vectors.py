"""The vector seam for a store that searches vectors itself (a hub space: pgvector's HNSW
index, cosine). It answers what the memory engine asks of search.VectorIndex, by asking
the database: loading every vector into memory would defeat the index it has.

A store offers this by having `vector_search(query, k, depth, window)` (the k nearest live
fragments as (id, cosine), best first) and `vector_similarities(query, ids)`. SQLite's
store has neither, and keeps the in-memory index exactly as before."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.types import Fragment
from .search import VectorIndex


class DatabaseVectors(VectorIndex):
    """VectorIndex's interface over a store's own vector search: every method the engine
    calls is answered by the database, none from the (empty) in-memory arrays."""

    def __init__(self, store: Any) -> None:
        super().__init__(None)
        self.store = store
        self._rows: dict[str, Fragment] = {}  # of the last searches, until take_rows

    def refresh(self, store: Any) -> None:
        """Nothing to load: the database's index is always current."""

    def load_dates(self, store: Any) -> None:
        """Nothing to load: the database filters by creation time itself."""

    def save_snapshot(self, store: Any) -> bool:
        return False  # there is no in-memory copy to snapshot

    def search(self, query: Any, k: int, depth: int | None = None,
               window: tuple[float, float] | None = None) -> list[tuple[str, float]]:
        if not hasattr(self.store, "vector_search_rows"):
            return self.store.vector_search(query, k, depth, window)  # type: ignore[no-any-return]
        found = self.store.vector_search_rows(query, k, depth, window)
        self._rows.update((f.id, f) for f, _ in found)
        return [(f.id, cos) for f, cos in found]

    def take_rows(self) -> dict[str, Fragment]:
        """The rows (without text or parent) the searches since the last call read along."""
        rows, self._rows = self._rows, {}
        return rows

    def search_many(self, query: Any, k: int, depth: int | None,
                    windows: list[tuple[float, float] | None]) -> list[list[tuple[str, float]]]:
        return [self.search(query, k, depth, window) for window in windows]

    def similarities(self, query: Any, wanted: Iterable[str]) -> dict[str, float]:
        return self.store.vector_similarities(query, list(wanted))  # type: ignore[no-any-return]
