"""Filling cue vectors after a writer's own commit, best effort (issue 30): a writer that
holds the model (a push, the service storing into a hub space, the ingestion worker, the
cycle of a hub space) embeds what its write left due. A failure is one log line and the
notes stay due for the next writer with the model; it never reaches the write it follows,
which is committed already. Never called on a hook's path: the model may have to load."""

from __future__ import annotations

import logging

from .cue_vector_fill import DueCues, fill_cue_vectors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..embedding.embedder import Embedder

log = logging.getLogger(__name__)


def fill_after_write(store: DueCues, embedder: Embedder | None, where: str,
                     most: int | None = None) -> int:
    """fill_cue_vectors on `store` (`where` names it in the log); 0 without a model or on
    any failure."""
    if embedder is None:
        return 0
    try:
        done = fill_cue_vectors(store, embedder, most=most)
    except Exception as exc:  # a dropped hub, a model that will not load: due, not lost
        log.warning("cue vectors of %s left due: %s", where, exc)
        return 0
    if done:
        log.info("cue vectors of %d note(s) in %s", done, where)
    return done
