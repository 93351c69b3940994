"""How close a query is to each candidate's cues (embedding/cue_vectors.py): the cosine of
the candidate's closest cue phrase, read only for the candidates a search already has."""

from __future__ import annotations

from typing import Any

from ..embedding.cue_vectors import closest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..store import Store


def cue_cosines(store: Store, qvec: Any, ids: list[str]) -> dict[str, float]:
    """id -> the cosine of its closest cue phrase with the query, for those of `ids` whose
    cue vectors are stored (a blob that cannot be read counts as none)."""
    out: dict[str, float] = {}
    if qvec is None or not ids:
        return out
    for fid, blob in store.cue_vectors(ids).items():
        try:
            out[fid] = closest(qvec, blob)
        except ValueError:
            continue
    return out


def cue_closeness(store: Store, qvec: Any, cos: dict[str, float], ids: list[str]
                  ) -> dict[str, float]:
    """`cos` with each of `ids` given the higher of its own cosine and its closest cue's."""
    cues = cue_cosines(store, qvec, ids)
    if not cues:
        return cos
    return {**cos, **{i: max(cos.get(i, 0.0), c) for i, c in cues.items()}}
