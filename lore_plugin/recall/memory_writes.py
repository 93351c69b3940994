"""The memory engine's writes: reconsolidation when fragments are recalled, storing one
fragment (checked, redacted, embedded outside the transaction), and filling in vectors and
written dates that could not be had when the text was stored."""

from __future__ import annotations

from typing import Any

from ..core import relevance as rel
from ..core.cues import join_cues
from ..core.errors import InvalidInput
from ..core.types import Fragment, NewFragment
from ..embedding.embedder import Embedder, to_blob
from ..store import Store
from .memory_base import (
    MAX_DEPTH,
    PLACEMENT_SIMILARITY,
    MemoryBase,
    _check_range,
    _check_text,
    _state,
    embedding_text,
    log,
)


class Writes(MemoryBase):
    def reinforce(self, ids: list[str], now: float | None = None) -> None:
        """Reconsolidation: recalled fragments are strengthened, their neighbours (parent
        and associations) more weakly, as of `now` (the answer's time; the clock's if not
        given). Best effort: a busy database skips it. For a store across a network it is
        written on the reinforcement thread (memory_base.after_answer)."""
        if not ids:
            return
        at = self.clock() if now is None else now

        def work() -> None:
            try:
                with self.session(self.writer):
                    self._reinforce(ids, at)
            except Exception as exc:  # recall must not fail because reinforcement could not write
                log.warning("reinforcement skipped: %s", exc)
        self.after_answer(work)  # on this thread, or after the answer for a hub space

    def _reinforce(self, ids: list[str], now: float) -> None:
        store = self.writer
        recalled = store.get_many(ids, with_text=False)  # states, parents, importance
        updates = {fid: (rel.reinforce(_state(f), now), f.importance)
                   for fid, f in recalled.items()}
        neighbours: dict[str, float] = {}
        for f in recalled.values():
            if f.parent_id:
                neighbours[f.parent_id] = max(neighbours.get(f.parent_id, 0.0), 0.5)
        for edge in store.edges_touching(list(recalled), ("associative", "temporal")):
            for fid, other in ((edge.source, edge.target), (edge.target, edge.source)):
                if fid in recalled:
                    neighbours[other] = max(neighbours.get(other, 0.0), edge.weight)
        near = store.get_many([n for n in neighbours if n not in updates], with_text=False)
        for fid, f in near.items():
            updates[fid] = (rel.spread(_state(f), neighbours[fid], now), f.importance)
        final = {fid: (s, rel.relevance(imp, s.access_count, s.decay_rate,
                                        s.last_reinforced, now))
                 for fid, (s, imp) in updates.items()}
        store.save_memory_states(final)

    def store(self, content: str, summary: str, parent_id: str | None = None,
              depth: int = 2, importance: float = 0.6, source_session: str | None = None,
              metadata: dict[str, Any] | None = None, source: str = "agent",
              vector: Any | None = None, fid: str | None = None, cues: str = "") -> Fragment:
        """Stores one fragment (under `fid` when given: an id store_memory reserved). With no
        parent, depth 0 makes a new topic; a deeper fragment is placed under the
        best-matching fragment one level up. `source` says who decided to
        keep it (types.SOURCES): the agent through store_memory, or the user ("remember"),
        whose word counts as confirmed. `cues`: clean_cues's form (core/cues.py), kept beside
        it (a repeat of the same text joins them to the existing fragment's)."""
        content, summary = _check_text(content, "content"), _check_text(summary, "summary")
        from ..safety.redact import redact  # its 150 patterns compile on import: not for the brief

        # Redacted before it is embedded or compared, not only when the store writes it.
        content, summary = redact(content), redact(summary)
        _check_range(depth, "depth", 0, MAX_DEPTH)
        parent: Fragment | None = None
        if parent_id:
            parent = self.get(parent_id)
            if parent.superseded_by:
                raise InvalidInput(f"parent {parent.id[:12]} was superseded by "
                                   f"{parent.superseded_by[:12]}; store under that one instead")
            if parent.depth != depth - 1:
                raise InvalidInput(
                    f"parent {parent.id[:12]} is at depth {parent.depth}, so a child must be at "
                    f"depth {parent.depth + 1}, not {depth}")
        elif depth > 0:
            # Place it in the branch where related knowledge already lives.
            recall = self.query(f"{summary}\n{content}", depth=depth - 1, limit=1, reinforce=False)
            found = recall.fragments
            if not found or (found[0].similarity < PLACEMENT_SIMILARITY and not recall.keyword_only):
                raise InvalidInput(
                    f"no parent_id given and no existing depth-{depth - 1} fragment fits; pass a "
                    "parent_id (see list_topics / query_memory) or depth=0 to start a new topic")
            parent = found[0].fragment
        same = self.writer.find_by_summary(summary, depth, parent.id if parent else None)
        existing = self.writer.get(same) if same else None
        if existing is not None and existing.content == content:
            if cues and join_cues(existing.cues, cues) != existing.cues:
                self.writer.update_text(existing.id, cues=join_cues(existing.cues, cues))
                return self.writer.get(existing.id)
            return existing  # storing the same thing twice keeps one copy
        if vector is None:  # storing.py passes the one it compared with the siblings
            vector = self.embed_one(embedding_text(summary, content,
                                                   parent.summary if parent else None))
        new = NewFragment(content=content, summary=summary, depth=depth, importance=importance,
                          source_session=source_session, project=self.project,
                          metadata=metadata or {}, source=source,
                          confirmed_at=self.clock() if source == "remember" else None, id=fid,
                          cues=cues)
        fid = self.writer.insert(new, self.clock(), None if vector is None else to_blob(vector),
                                 parent.id if parent else None)
        return self.writer.get(fid)

    def date_backlog(self) -> int:
        """Dates older fragments by their text (Store.date_written_backlog); how many read."""
        total = 0
        while done := self.writer.date_written_backlog():
            total += done
        return total

    def backfill_embeddings(self, batch: int = 64) -> int:
        """Embeds fragments stored while no model was available. Returns how many."""
        if not self.embedder_ready():
            return 0
        done = 0
        while rows := self.writer.missing_embeddings(batch):
            done += embed_in_place(self.writer, self.embedder,  # type: ignore[arg-type]
                                   [fid for fid, _ in rows])
        return done

    def reembed(self, ids: list[str], batch: int = 64) -> int:
        """New vectors for fragments whose own text did not change but whose embedding text
        did: it names the parent's summary (embedding_text), so a fragment moved elsewhere, or
        the children of a fragment whose summary was edited, would otherwise be found by
        their old context. With no model the old vectors stay. Returns how many."""
        if not self.embedder_ready():
            return 0
        return reembed(self.writer, self.embedder, ids, batch)  # type: ignore[arg-type]


def reembed(store: Store, embedder: Embedder, ids: list[str], batch: int = 64) -> int:
    """Memory.reembed for callers that hold a store and an embedder (consolidation)."""
    return sum(embed_in_place(store, embedder, ids[start:start + batch])
               for start in range(0, len(ids), batch))


def embed_in_place(store: Store, embedder: Embedder, ids: list[str]) -> int:
    """Embeds these fragments' current text in their current place and stores the vectors.
    The model runs before the short write, never under it."""
    frags = store.get_many(ids)
    parents = store.get_many([f.parent_id for f in frags.values() if f.parent_id],
                             with_parent=False)
    order = [fid for fid in ids if fid in frags]
    if not order:
        return 0
    texts = [embedding_text(frags[fid].summary, frags[fid].content,
                            parents[p].summary if (p := frags[fid].parent_id) in parents
                            else None) for fid in order]
    vectors = embedder.embed(texts)
    store.set_embeddings([(fid, to_blob(v)) for fid, v in zip(order, vectors)])
    return len(order)
