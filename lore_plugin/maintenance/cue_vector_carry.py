"""Cue vectors carried with the notes a copy moves between the local file and a hub space
(`lore hub push`/`pull`, `lore share`/`unshare`), so that what one side has embedded is not
embedded again on the other (issue 30).

The target's triggers have marked every copied note with cues due; the source's vectors of
those notes follow, stored only where the target keeps the same cues (set_cue_vectors' guard).
A copy redacts and bounds cues (hub/rows.stored_cues): vectors of cues it changed are not even
sent, and stay due for a writer with the model."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..hub.rows import stored_cues

if TYPE_CHECKING:
    from ..hub import HubStore
    from ..store import Store

log = logging.getLogger(__name__)


def carry_cue_vectors(source: Store | HubStore, target: Store | HubStore,
                       chunk: list[dict[str, Any]],
                       lacking: Callable[[list[str]], list[str]]) -> int:
    """The source's vectors of the chunk's notes that `lacking` says the target has none
    of, stored where the target's cues are the source's; how many were stored."""
    cued = {row["id"]: row["cues"] for row in chunk if row.get("cues")}
    wanted = [fid for fid in (lacking(list(cued)) if cued else [])
              if stored_cues(cued[fid]) == cued[fid]]
    blobs = source.cue_vectors(wanted) if wanted else {}
    return target.set_cue_vectors([(fid, cued[fid], b) for fid, b in blobs.items()])


def lacking_locally(local: Store) -> Callable[[list[str]], list[str]]:
    """The `lacking` of a local file: its blobs are an in-process read."""
    def lacking(ids: list[str]) -> list[str]:
        have = local.cue_vectors(ids)
        return [fid for fid in ids if fid not in have]
    return lacking


def carry_quietly(source: Store | HubStore, target: Store | HubStore,
                  rows: list[dict[str, Any]], lacking: Callable[[list[str]], list[str]]
                  ) -> int:
    """carry_cue_vectors for a move whose rows are committed already: a failure is one log
    line, and the notes stay due."""
    try:
        return carry_cue_vectors(source, target, rows, lacking)
    except Exception as exc:
        log.warning("cue vectors not carried (the notes stay due): %s", exc)
        return 0
