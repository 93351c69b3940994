"""The viewer's engine with its searches served by the memory service of its Lore home (issue
27: the viewer uses the one warm service when it runs), so a viewer loads no model and no
vector index of its own for them. The service answers ids, scores and similarities; the rows
are read here, from the viewer's own read connection. When no service can be had (switched
off, no Unix sockets, another database in the home), the search runs here, as before."""

from __future__ import annotations

import logging
from typing import Any

from ..core.types import ScoredFragment
from ..recall.memory import Memory, Recall
from ..service.client import ServiceClient, Unavailable

log = logging.getLogger(__name__)


class ServedMemory(Memory):
    """A Memory whose non-reinforcing searches go to the service first. Everything else
    (pages, curation, edits) is the plain Memory's, on the viewer's own connections."""

    def __init__(self, db_path: Any, embedder: Any, home: str, **kwargs: Any) -> None:
        super().__init__(db_path, embedder, **kwargs)
        self.service = ServiceClient(home, str(self.db_path))
        self.served = 0  # searches the service answered, for tests and the status

    def search(self, text: str, limit: int = 10, depth: int | None = None,
               mode: str = "hybrid", include_superseded: bool = False) -> Recall:
        if depth is None and mode == "hybrid" and not include_superseded:
            found = self._ask(text, None, limit)
            if found is not None:
                return found
        return super().search(text, limit, depth, mode, include_superseded)

    def query(self, topic: str, depth: int = 1, limit: int = 10,
              include_superseded: bool = False, reinforce: bool = True) -> Recall:
        if not reinforce and not include_superseded:
            found = self._ask(topic, depth, limit)
            if found is not None:
                return found
        return super().query(topic, depth, limit, include_superseded, reinforce)

    def _ask(self, text: str, depth: int | None, limit: int) -> Recall | None:
        if not self.service.usable:
            return None
        try:
            answer = self.service.request("search", {"text": text, "depth": depth,
                                                     "limit": limit, "project": self.project})
        except Unavailable as exc:
            log.info("viewer: searching in-process: %s", exc)
            return None
        hits = answer.get("hits")
        if not isinstance(hits, list):  # an error (bad input): the engine here says it
            return None
        rows = self.reader.get_many([str(h[0]) for h in hits])
        self.served += 1
        return Recall([ScoredFragment(rows[h[0]], float(h[1]), float(h[2]))
                       for h in hits if h[0] in rows], bool(answer.get("keyword_only")))

    def close(self) -> None:
        self.service.close()
        super().close()
