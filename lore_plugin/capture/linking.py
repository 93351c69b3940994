"""How the parts of one extraction find each other: the fragments it plans and their vectors,
the new one a correction or a relationship names, and the temporal chain of siblings."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..core.types import NewFragment, ScoredFragment
from ..embedding.embedder import Embedder
from ..recall.memory import Memory, embedding_text
from ..store import Store

log = logging.getLogger(__name__)
RELATION_MATCH = 0.6


@dataclass
class Planned:
    key: int
    new: NewFragment
    parent_key: int | None = None  # index of a planned parent ...
    parent_id: str | None = None  # ... or the id of an existing one
    parent_summary: str | None = None
    fid: str | None = None
    vector: Any = None
    duplicate_of: str | None = None  # an existing fragment it repeats: not inserted


def planned_match(planned: list[Planned], text: str, depth: int, vector: Any | None,
                  inserted: bool = True) -> Planned | None:
    """The planned fragment at `depth` named `text`, else the closest by embedding; with
    `inserted`, only those already written (a fid)."""
    best, best_sim = None, RELATION_MATCH
    for item in planned:
        if item.new.depth != depth or (inserted and item.fid is None) or item.duplicate_of:
            continue
        if item.new.summary.strip().lower() == text.strip().lower():
            return item
        if vector is not None and item.vector is not None:
            sim = float(item.vector @ vector)
            if sim > best_sim:
                best, best_sim = item, sim
    return best


def best_planned(planned: list[Planned], text: str, depth: int, vector: Any | None
                 ) -> str | None:
    item = planned_match(planned, text, depth, vector)
    return None if item is None else item.fid


def resolve_name(memory: Memory, planned: list[Planned], text: str, vector: Any | None,
                 found: list[ScoredFragment]) -> str | None:
    """The fragment a relationship names: a new or existing one by name, then the closest
    new one, then `found`, the best existing match searched before the write began."""
    lowered = text.strip().lower()
    for item in planned:
        if item.fid and item.new.summary.strip().lower() == lowered:
            return item.fid
    existing = memory.writer.find_by_summary(text)
    if existing:
        return existing
    for depth in (1, 2, 0):
        hit = best_planned(planned, text, depth, vector)
        if hit:
            return hit
    if found and found[0].similarity >= RELATION_MATCH:
        return found[0].fragment.id
    return None


def temporal_edges(store: Store, planned: list[Planned], now: float) -> int:
    """Sequential siblings are chained in the order they came, and the first newcomer
    under an existing parent follows that parent's latest earlier child."""
    new_by_parent: dict[str, set[str]] = {}
    for item in planned:
        parent = item.parent_id if item.parent_key is None else planned[item.parent_key].fid
        if parent and item.fid and item.new.depth > 0:
            new_by_parent.setdefault(parent, set()).add(item.fid)
    count = 0
    for parent, newcomers in new_by_parent.items():
        siblings = store.child_ids(parent)  # oldest first
        first = min(siblings.index(f) for f in newcomers if f in siblings)
        chain = siblings[max(first - 1, 0):]
        for earlier, later in zip(chain, chain[1:]):
            store.link(earlier, later, "temporal", 1.0, now)
            count += 1
    return count


def _usable(embedder: Embedder | None) -> bool:
    return embedder is not None and getattr(embedder, "available", True)


def vectors_for(embedder: Embedder | None, texts: list[str]) -> dict[str, Any]:
    """One batch for all of them; empty when there is no model (embedded later)."""
    unique = list(dict.fromkeys(texts))
    if not unique or embedder is None or not _usable(embedder):
        return {}
    try:
        return dict(zip(unique, embedder.embed(unique)))
    except Exception as exc:  # no vectors: those fragments are embedded later
        log.warning("embedding failed: %s", exc)
        return {}


def embed_planned(embedder: Embedder | None, planned: list[Planned]) -> None:
    if not planned or embedder is None or not _usable(embedder):
        return
    texts = [embedding_text(p.new.summary, p.new.content, p.parent_summary) for p in planned]
    try:
        vectors = embedder.embed(texts)
    except Exception as exc:
        log.warning("embedding failed, stored without vectors: %s", exc)
        return
    for item, vector in zip(planned, vectors):
        item.vector = vector
