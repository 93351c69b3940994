"""The second half of a store that ran the model once (group_commit.py): a fact placed by
store_memory is stored with its placement query's vector, the text alone, and marked
(Store.mark_recontext) in the same transaction; here the vector of its text under its
parent's summary, the one Memory.store would have given it (embedding_text), replaces it.

The writer does this when no store came for a moment (or when the marks pile up), a small
batch at a time in one model call; what a writer closing or a crash leaves marked, the next
writer or the service's warm-up finishes, so every such vector ends as it would have been
without the shortcut. The writer's process
patches its vector index in place (VectorIndex.replace); other processes' copies keep the
provisional vector until they next load in full (it is the text's own, a fair one)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..core.faults import crash_point
from ..embedding.embedder import to_blob
from ..store import Store
from .memory_base import embedding_text

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder
    from .search import VectorIndex

log = logging.getLogger(__name__)
# Fragments a model call: small, so that a writer closing waits at most one short call (an
# exit while onnxruntime runs on a daemon thread aborts the process).
BATCH = 16


def recontext(store: Store, embedder: Embedder, index: VectorIndex | None,
              limit: int = BATCH) -> int:
    """Replaces up to `limit` provisional vectors; returns how many it looked at (fewer
    than `limit`: none is left)."""
    rows = store.recontext_pending(limit)
    if not rows:
        return 0
    vectors = embedder.embed([embedding_text(summary, content, parent)
                              for _, summary, content, parent in rows])
    crash_point("group-before-recontext")
    store.set_recontexted([(row[0], to_blob(v)) for row, v in zip(rows, vectors)])
    if index is not None:
        index.refresh(store)  # the rows must be in it before they can be patched
        index.replace({row[0]: v for row, v in zip(rows, vectors)})
    return len(rows)


def recontext_all(store: Store, embedder: Embedder, index: VectorIndex | None) -> int:
    """Every provisional vector left (the service's warm-up: a crash's leftovers)."""
    total = 0
    while True:
        done = recontext(store, embedder, index)
        total += done
        if done < BATCH:
            return total
