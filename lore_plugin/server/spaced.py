"""The tools over spaces (issue 28): with a hub configured, query_memory reads the local
file and the hub spaces as one (recall/spaces.py) and store_memory writes to the space the
project is routed to. Without a hub these are the local memory's own calls, unchanged."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from ..core.config import Settings
from ..core.types import Fragment
from ..recall.memory import Memory
from ..recall.spaces import LOCAL, FusedRecall, SpaceHit, Spaces
from ..recall.storing import Stored, store_knowledge

__all__ = ["LOCAL", "Spaces", "attach", "fused_query", "store", "writing_memory"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class Service(Protocol):
    """What of tools.Service this module uses (named here: tools imports this module)."""

    memory: Memory
    spaces: Spaces | None
    write_space: str

    def call(self, fn: Callable[[Memory], T], needs_model: bool = False) -> T: ...


def attach(service: Service, settings: Settings) -> None:
    """Gives the service the hub spaces it reads and the space it writes to."""
    if not settings.hub_url:
        return
    from ..capture.hub_link import spaces_for

    service.spaces = spaces_for(settings, service.memory)
    service.write_space = settings.space_for(service.memory.project)
    log.info("spaces read: %s; writes go to %s", ", ".join(service.spaces.names),
             service.write_space)


def fused_query(service: Service, memory: Memory, topic: str, depth: int, limit: int
                ) -> FusedRecall:
    """query_memory's results, each with its space; reinforcement is left to the caller
    (the local file's, off the answer path) except in hub spaces, done here."""
    if service.spaces is None:
        found = memory.query(topic, depth=depth, limit=limit, reinforce=False)
        return FusedRecall([SpaceHit(LOCAL, s) for s in found.fragments], found.keyword_only)
    fused = service.spaces.query(topic, depth, limit, reinforce=False)
    reinforce_hub(service.spaces, fused.hits)
    return fused


def reinforce_hub(spaces: Spaces, hits: list[SpaceHit]) -> None:
    for space in {h.space for h in hits} - {LOCAL}:
        try:
            spaces.memory(space).reinforce([h.fragment.id for h in hits if h.space == space])
        except Exception as exc:  # best effort, as for the local file
            log.warning("reinforcing in %s: %s", space, exc)


def store(service: Service, content: str, summary: str, parent_id: str | None, depth: int
          ) -> tuple[Stored, Fragment | None]:
    """store_memory in the routed space: (what was stored, its parent). Two calls: a busy
    retry of the first must never repeat a write that went through."""
    stored = service.call(lambda m: store_knowledge(writing_memory(service, m), content,
                                                    summary, parent_id, depth), True)
    parent = service.call(lambda m: writing_memory(service, m).parent(stored.fragment.id))
    return stored, parent


def writing_memory(service: Service, memory: Memory) -> Memory:
    """Where store_memory writes: the routed space's memory (HubError if unreachable)."""
    if service.spaces is None or service.write_space == LOCAL:
        return memory
    return service.spaces.memory(service.write_space)
