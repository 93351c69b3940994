"""A store request on the group-commit path (group_commit.py), and the steps of one inside a
batch: whether and with what words placement queries the model, keeping it once placed, and
its own savepoint."""

from __future__ import annotations

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
    """store_memory's arguments. `project` None means the writer's own."""
    content: str
    summary: str
    parent_id: str | None = None
    depth: int = 2
    source: str = "agent"
    importance: float = 0.6
    project: str | None = None


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


def keep(memory: BatchMemory, placed: Placed, provisional: Any) -> Stored:
    stored, pending = keep_provisionally(memory, placed, provisional, memory.embed_one)
    if pending and not stored.duplicate:  # in the request's savepoint, with its insert
        memory.writer.mark_recontext(stored.fragment.id)
        stored = replace(stored, provisional=True)
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
