"""What the group-commit writer (group_commit.py) does when no store is waiting, after the
answers: provisional vectors replaced (recontext.py), then the cue vectors of notes stored
or given cues filled (cue_vector_fill.py). A small batch a round, so a store that arrives
meanwhile waits at most one short model call (and a writer closing, too: an exit while
onnxruntime runs on a daemon thread aborts the process)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

from ..store import Store
from .cue_vector_fill import fill_cue_vectors
from .recontext import BATCH as RECONTEXT_BATCH
from .recontext import recontext

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder
    from .search import VectorIndex

log = logging.getLogger(__name__)
CUES_BATCH = 16  # notes a round fills the cue vectors of (some 60 phrases, ~0.1 s)


class IdleWriter(Protocol):
    """What a round needs of the writer (group_commit.GroupWriter)."""

    embedder: Embedder | None
    index: VectorIndex | None
    timings: dict[str, float]
    recontext_calls: int
    recontext_due: int  # provisional vectors known to wait
    cues_due: bool  # cue vectors may be due

    def writable(self) -> Store: ...

    def drop_store(self) -> None: ...


def idle_round(writer: IdleWriter) -> None:
    """One round: a batch of provisional vectors if any wait, else a batch of cue vectors.
    Best effort: a failure is logged and leaves them due for the next writer or warm-up."""
    if writer.embedder is None or not getattr(writer.embedder, "available", True):
        writer.recontext_due, writer.cues_due = 0, False
        return
    try:
        store = writer.writable()
        started = time.perf_counter()
        if writer.recontext_due:
            done = recontext(store, writer.embedder, writer.index)
            writer.timings["recontext"] += time.perf_counter() - started
            writer.recontext_calls += done > 0
            writer.recontext_due = (0 if done < RECONTEXT_BATCH
                                    else max(writer.recontext_due - done, 1))
        else:
            filled = fill_cue_vectors(store, writer.embedder, most=CUES_BATCH)
            writer.timings["cue_vectors"] += time.perf_counter() - started
            writer.cues_due = filled >= CUES_BATCH  # a full batch: maybe more wait
    except Exception as exc:  # noqa: BLE001 - left due: the next writer or warm-up retries
        log.warning("could not replace provisional vectors or fill cue vectors: %s", exc)
        writer.drop_store()
        writer.recontext_due, writer.cues_due = 0, False
