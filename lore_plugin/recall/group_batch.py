"""One group-commit batch written (group_commit.py): one transaction in which each request
is placed in turn (store_knowledge's rules, each reading what the ones before it wrote), one
model call for the texts that need their own vector now, then each duplicate check and insert
under the request's reserved id. Rows the database already knows (placed before a crash) are
answered from it, not placed twice."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ..core.errors import InvalidInput, LoreError
from ..core.faults import crash_point
from ..store import Store
from .group_requests import StoreRequest, alone, keep, placed_here, query_words
from .group_view import BatchIndex, BatchMemory, PrefilledEmbedder
from .storing import Placed, Stored, place_knowledge

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import tzinfo

    from ..embedding.embedder import Embedder
    from .search import VectorIndex

log = logging.getLogger(__name__)
# A request, its caller's future, and its placement query's text and vector (stage one).
Pending = tuple[StoreRequest, "Future[Stored]", tuple[str, Any] | None]


def parent_now(store: Store, request: StoreRequest) -> StoreRequest:
    """The parent a journal row named, as it is at placement: consolidation may have merged
    it away (its survivor takes the child) or forgotten it since the row was accepted. An
    accepted store is never dropped for that: with no live parent at the right depth it is
    placed as if it had named none (under the best match at its depth), and the log says so."""
    if not request.parent_id or request.fid is None:  # not from the journal: checked as ever
        return request
    try:
        parent = store.get(store.live_version(store.resolve_id(request.parent_id)))
    except LoreError:
        parent = None
    if parent is not None and parent.superseded_by is None and parent.depth == request.depth - 1:
        return request if parent.id == request.parent_id else replace(request,
                                                                      parent_id=parent.id)
    log.warning("store %s: its parent %s is gone or merged away since it was accepted; "
                "placed under the best match instead", request.fid, request.parent_id)
    return replace(request, parent_id=None)


class GroupWriter(Protocol):
    """What a batch needs of its writer (group_commit.GroupWriter): its model, index, clock
    and default project, and the counters it adds to."""
    index: VectorIndex | None
    embedder: Embedder | None
    clock: Callable[[], float]
    tz: tzinfo | None
    project: str | None
    timings: dict[str, float]
    model_calls: int


def write_parts(writer: GroupWriter, store: Store, batch: list[Pending]
                ) -> tuple[list[Stored | BaseException], int]:
    """The batch in parts, each its own transaction, cut before a request whose parent is a
    reserved id placed earlier in the same part: a placement reads its parent from the
    database, and that parent is inserted only at its part's end (without the cut the child
    found no parent and was dropped). A retry after a failure in a later part answers the
    earlier parts' rows from the database (their ids are known), placing nothing twice."""
    results: list[Stored | BaseException] = []
    provisional = 0
    start = 0
    while start < len(batch):
        end, fids = start, set()
        while end < len(batch) and (end == start or batch[end][0].parent_id not in fids):
            if batch[end][0].fid is not None:
                fids.add(batch[end][0].fid)
            end += 1
        done, more = write_batch(writer, store, batch[start:end])
        results += done
        provisional += more
        start = end
    return results, provisional


def write_batch(writer: GroupWriter, store: Store, batch: list[Pending]
                ) -> tuple[list[Stored | BaseException], int]:
    """One transaction for the batch: placement of each request in turn, one model call
    for the texts that cannot keep their placement query's vector for now (a parent
    given, a topic), then each near-duplicate check and insert in turn."""
    requests = [request for request, _, _ in batch]
    assert writer.index is not None
    provisional = 0
    outcome: list[Stored | BaseException | None] = [None] * len(requests)
    placed: list[Placed | None] = [None] * len(requests)
    embedder = None if writer.embedder is None else PrefilledEmbedder(writer.embedder)
    words = [query_words(r, writer.clock, writer.tz) if placed_here(r) else None for r in requests]
    # The queries' model call comes before the transaction; the texts' call runs inside it
    # (their parents are known only there), so the lock is held for one batched call.
    if embedder is not None:
        started = time.perf_counter()
        embedder.known.update(ahead for _, _, ahead in batch if ahead is not None)
        embedder.prefill([w for w, (_, _, ahead) in zip(words, batch)
                          if ahead is None and w is not None])
        writer.timings["embed_queries"] += time.perf_counter() - started
    with store.write():
        known = store.known_ids([r.fid for r in requests if r.fid is not None])
        for i, request in enumerate(requests):  # placed before a crash: not twice
            if request.fid in known:
                target = known[request.fid]
                outcome[i] = Stored(store.get(target), duplicate=target != request.fid)
        view = BatchIndex(writer.index, store, [] if embedder is None else [
            embedder.known[w] for w in dict.fromkeys(words) if w in embedder.known])
        memory = BatchMemory(store, view, embedder, writer.clock, writer.tz)
        marks = [time.perf_counter()]
        for i, request in enumerate(requests):
            if outcome[i] is not None:
                continue
            request = parent_now(store, request)
            memory.project = request.project or writer.project
            step = partial(place_knowledge, memory, request.content, request.summary,
                           request.parent_id, request.depth, request.source,
                           request.importance, request.cues)
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
                memory.project = requests[i].project or writer.project
                outcome[i] = alone(store, view, partial(keep, memory, one, ahead[i],
                                                        requests[i].fid))
                if getattr(outcome[i], "provisional", False):
                    provisional += 1
        if embedder is not None:
            writer.model_calls += embedder.model_calls
        crash_point("group-before-commit")
        marks.append(time.perf_counter())
    marks.append(time.perf_counter())
    if len(marks) == 5:  # with a model: place, embed, keep, commit
        for name, (start, end) in zip(("place", "embed_texts", "keep", "commit"),
                                      zip(marks, marks[1:])):
            writer.timings[name] += end - start
    return [r if r is not None else InvalidInput("not stored") for r in outcome], provisional
