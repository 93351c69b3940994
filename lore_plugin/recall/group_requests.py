"""A store request on the group-commit path (group_commit.py), and the steps of one inside a
batch: whether and with what words placement queries the model, keeping it once placed, and
its own savepoint."""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import tzinfo
from typing import Any

from ..safety.redact import redact
from ..store import DatabaseError, Store, StoreError
from .group_view import BatchIndex, BatchMemory
from .storing import Placed, Stored, keep_provisionally


@dataclass(frozen=True)
class StoreRequest:
    """store_memory's arguments. `project` None means the writer's own. Once accepted into
    the store journal (store_journal.py): the fragment id reserved for it and its place there."""
    content: str
    summary: str
    parent_id: str | None = None
    depth: int = 2
    source: str = "agent"
    importance: float = 0.6
    project: str | None = None
    fid: str | None = None
    seq: int | None = None
    cues: str = ""  # clean_cues's form (store_journal.checked makes it so)


def take(source: queue.SimpleQueue, most: int) -> tuple[list[Any], bool]:
    """What is queued (waiting for the first), at most `most`; and whether the end (None)
    came."""
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


def query_words(request: StoreRequest, clock: Callable[[], float], tz: tzinfo | None) -> str:
    """The text placement will embed (Memory._rank_candidates: the stored text without
    the time it names). A guess that misses only costs that text a model call alone."""
    text = f"{redact(request.summary.strip())}\n{redact(request.content.strip())}"
    from ..core import timeparse

    window = timeparse.parse(text, clock(), tz)
    return text if window is None else window.strip(text)


def placed_here(request: StoreRequest) -> bool:
    """Whether placement runs a query for this request (store_knowledge's condition)."""
    return (not request.parent_id and isinstance(request.depth, int)
            and not isinstance(request.depth, bool) and request.depth > 0
            and isinstance(request.content, str) and isinstance(request.summary, str))


def keep(memory: BatchMemory, placed: Placed, provisional: Any, fid: str | None = None
         ) -> Stored:
    """Stores the placed request under `fid` (its reserved id), or reinforces what it repeats
    and redirects `fid` there; all in the request's savepoint, with its insert."""
    stored, pending = keep_provisionally(memory, placed, provisional, memory.embed_one, fid)
    if pending and not stored.duplicate:
        memory.writer.mark_recontext(stored.fragment.id)
        stored = replace(stored, provisional=True)
    if fid is not None and stored.fragment.id != fid:  # a repeat: the id the caller has
        memory.writer.redirect(fid, stored.fragment.id)  # must still lead somewhere
    return stored


def alone(store: Store, view: BatchIndex, step: Callable[[], Any]) -> Any:
    """Runs one request's step in its own savepoint: an error of its own is its answer and
    undoes only its changes; a database error ends the batch."""
    try:
        with store.savepoint():
            return step()
    except (DatabaseError, StoreError):
        raise
    except Exception as exc:  # noqa: BLE001 - the request's own failure, handed to its caller
        view.restart_tail()
        return exc
