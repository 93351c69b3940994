"""Embeds the cues whose vectors are due (embedding/cue_vectors.py), on either store.

A store keeps a note's cue vectors due from the moment its cues are written or changed until
they are filled here (the stores' own triggers mark them, so no writer can forget to), and
serves only vectors made from the note's current cues. Writers that hold the model call this
after their own commit: the memory service after each group of stores and at warm-up, the
ingestion worker after a batch, consolidation after it writes cues. The model runs before
the short write, never under it; the write is refused for a note whose cues changed in
between, which stays due for the next call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..core.cues import cue_list
from ..embedding.cue_vectors import encode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..embedding.embedder import Embedder

BATCH = 64  # notes a pass embeds the cues of (some 300 phrases)


class DueCues(Protocol):
    """What this needs of a store: SQLite's (store.Store) and a hub space's (hub.HubStore)."""

    def cue_vectors_due(self, limit: int) -> list[tuple[str, str]]:
        """Up to `limit` (note id, its cues) whose vectors are due."""

    def set_cue_vectors(self, rows: Sequence[tuple[str, str, bytes | None]]) -> int:
        """Stores each (id, the cues the blob was made from, blob); None: no vectors, and no
        longer due. A row whose note's cues are no longer those is left due. Returns how
        many rows it stored."""


def fill_cue_vectors(store: DueCues, embedder: Embedder, batch: int = BATCH,
                     most: int | None = None) -> int:
    """Embeds due cues, `batch` notes a pass, until none is due (or `most` notes are
    done, or a pass writes nothing: every one of its notes changed meanwhile). Returns how
    many notes got their vectors."""
    done = 0
    while most is None or done < most:
        due = store.cue_vectors_due(batch if most is None else min(batch, most - done))
        if not due:
            break
        phrases = [cue_list(cues) for _, cues in due]
        flat = [p for ps in phrases for p in ps]
        vectors = embedder.embed(flat) if flat else None
        rows, at = [], 0
        for (fid, cues), ps in zip(due, phrases):
            # None: cues with no phrase in them are no longer due, and have no vectors.
            rows.append((fid, cues, encode(vectors[at:at + len(ps)])
                         if ps and vectors is not None else None))
            at += len(ps)
        written = store.set_cue_vectors(rows)
        if not written:
            break
        done += written
    return done
