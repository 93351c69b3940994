"""The tools over spaces (issue 28): with a hub configured, query_memory reads the local
file and the hub spaces as one (recall/spaces.py) and store_memory writes to the space the
project is routed to. Without a hub these are the local memory's own calls, unchanged."""

from __future__ import annotations

import logging
from typing import cast

from ..core.config import Settings
from ..core.types import Fragment
from ..recall.cue_vector_fill import DueCues
from ..recall.cue_vector_upkeep import fill_after_write
from ..recall.memory import Memory
from ..recall.spaces import LOCAL, FusedRecall, SpaceHit, Spaces
from ..recall.storing import Stored, store_knowledge
from .engine import Service

__all__ = ["LOCAL", "Spaces", "attach", "fused_query", "store", "write_space"]

log = logging.getLogger(__name__)
FILL_STEP = 8  # notes whose cues are embedded under the service's lock at a time (~0.1 s)
FILL_MOST = 64  # a store's share of a backlog (a migrated hub): closing waits for it


def attach(service: Service, settings: Settings) -> None:
    """Gives the service the hub spaces it reads and the space it writes to."""
    if not settings.hub_url:
        return
    from ..capture.hub_link import spaces_for

    service.spaces = spaces_for(settings, service.memory)
    service.settings = settings
    log.info("spaces read: %s", ", ".join(service.spaces.names))


def write_space(service: Service, project: str | None) -> str:
    """The space `project`'s new knowledge goes to. One service serves several projects, so
    it is asked per call, not fixed at start."""
    if service.spaces is None or service.settings is None:
        return LOCAL
    return service.settings.space_for(project if project is not None else service.memory.project)


def fused_query(service: Service, memory: Memory, topic: str, depth: int, limit: int
                ) -> FusedRecall:
    """query_memory's results, each with its space; reinforcement is left to the caller
    (the local file's, off the answer path) except in hub spaces, done here."""
    if service.spaces is None:
        found = memory.query(topic, depth=depth, limit=limit, reinforce=False)
        return FusedRecall([SpaceHit(LOCAL, s) for s in found.fragments], found.keyword_only)
    service.spaces.set_project(memory.project)  # the calling session's (set by service.call)
    fused = service.spaces.query(topic, depth, limit, reinforce=False)
    reinforce_hub(service.spaces, fused.hits)
    return fused


def reinforce_hub(spaces: Spaces, hits: list[SpaceHit]) -> None:
    for space in {h.space for h in hits} - {LOCAL}:
        try:
            spaces.memory(space).reinforce([h.fragment.id for h in hits if h.space == space])
        except Exception as exc:  # best effort, as for the local file
            log.warning("reinforcing in %s: %s", space, exc)


def store(service: Service, space: str, content: str, summary: str, parent_id: str | None,
          depth: int, project: str | None, cues: str = "") -> tuple[Stored, Fragment | None]:
    """store_memory in a hub space: (what was stored, its parent). Two calls: a busy retry of
    the first must never repeat a write that went through. The local file's stores go through
    the group-commit writer instead (answers.store_memory)."""
    def hub(m: Memory) -> Memory:
        target = service.spaces.memory(space)  # type: ignore[union-attr]  # LoreError if unreachable
        target.project = m.project
        return target

    stored = service.call(lambda m: store_knowledge(hub(m), content, summary, parent_id, depth,
                                                    cues=cues), True, project)
    parent = service.call(lambda m: hub(m).parent(stored.fragment.id), project=project)
    if cues:
        fill_later(service, service.spaces.memory(space))  # type: ignore[union-attr]  # open
    return stored, parent


def fill_later(service: Service, target: Memory) -> None:
    """After the answer: the cue vectors the store left due in the hub space, a few notes
    at a time under the service's lock (the model is the service's, and tools wait for it
    only that long), up to FILL_MOST notes (the rest of a backlog is the worker's and the
    cycle's, or the next store's). Best effort: a failure leaves them due."""
    hub = cast("DueCues", target.writer)  # a hub space's Memory writes through its HubStore
    where = f"hub space {getattr(hub, 'space', '?')}"

    def step(_: Memory) -> int:
        return fill_after_write(hub, target.embedder, where, most=FILL_STEP)

    def work() -> None:
        try:
            for _ in range(FILL_MOST // FILL_STEP):
                if service.call(step) < FILL_STEP:
                    break
        except Exception as exc:  # the service's own refusals (busy): due, not lost
            log.warning("cue vectors of %s left due: %s", where, exc)
    service.later(work)
