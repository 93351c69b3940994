"""The brief's knowledge from the hub spaces (issue 28), named by space and ranked with the
local file's, read within HUB_DEADLINE: SessionStart must return within its budget whatever
the hub does, so a space that has not answered by then is left out and named instead."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.config import Settings

Item = tuple[float, str, str]  # (rank, id, line), as brief.knowledge_items gives
Items = Callable[[Any, str | None, str], list[Item]]

HUB_DEADLINE = 1.0  # seconds for every hub space together


def _read(settings: Settings, space: str, project: str | None, items_of: Items,
          out: dict[str, list[Item] | str]) -> None:
    try:
        from ..capture.hub_link import open_store

        store = open_store(settings, space)
        try:
            if not hasattr(store, "knowledge_of"):
                store = _KnowledgeOf(store)  # type: ignore[assignment]
            out[space] = items_of(store, project, space)
        finally:
            store.close()
    except Exception as exc:  # any failure is a space not reached, never a failed hook
        out[space] = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)


def hub_knowledge(settings: Settings, project: str | None, local: list[Item], items_of: Items
                  ) -> tuple[list[Item], list[str]]:
    """(every item, local and hub, best first, each id once; notes on spaces not reached)."""
    out: dict[str, list[Item] | str] = {}
    threads = [threading.Thread(target=_read, args=(settings, space, project, items_of, out),
                                daemon=True, name=f"lore-brief-{space}")
               for space in settings.hub_spaces]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + HUB_DEADLINE
    for thread in threads:  # daemon threads: a hung connect does not hold the hook's exit
        thread.join(timeout=max(deadline - time.monotonic(), 0.0))
    items, notes, seen = list(local), [], {fid for _, fid, _ in local}
    for space in settings.hub_spaces:
        found = out.get(space)
        if isinstance(found, list):
            items += [item for item in found if item[1] not in seen]
            seen |= {fid for _, fid, _ in found}
        else:
            why = found or f"no answer within {HUB_DEADLINE:g} s"
            notes.append(f"Lore hub space {space} not reached, its knowledge is not in this "
                         f"brief: {why[:200]}")
    items.sort(key=lambda item: item[0], reverse=True)
    return items, notes


class _KnowledgeOf:
    """ADAPTER, to drop once HubStore offers `knowledge_of` (store/hierarchy.py's brief
    query): the same rows from methods the hub has, the most relevant topics' live facts
    and details of `project` or of no project, at most SCAN fragments read."""

    TOPICS, SCAN = 30, 600

    def __init__(self, store: Any) -> None:
        self.store = store

    def knowledge_of(self, project: str | None, limit: int) -> list[tuple[Any, int, int]]:
        ids: list[str] = []
        for topic in self.store.topic_ids()[:self.TOPICS]:
            ids += [fid for fid, _ in self.store.descendant_ids(topic, 3)]
            if len(ids) >= self.SCAN:
                break
        found = self.store.get_many(ids[:self.SCAN]).values()
        kept = [f for f in found if f.depth >= 2 and not f.superseded_by
                and (f.project == project or f.project is None)]
        kept.sort(key=lambda f: (f.importance, f.relevance_score), reverse=True)
        return [(f, 0, 0) for f in kept[:limit]]

    def close(self) -> None:
        self.store.close()
