"""The query engine: recall, explore, traverse, store and topics, with reinforcement.
This is what the MCP tools and the CLI call. Reads go through a read-only connection;
reinforcement and stores are short write transactions, and embedding happens outside them."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import tzinfo
from pathlib import Path
from typing import Any

from . import relevance as rel
from .embedding import Embedder, to_blob
from .errors import InvalidInput
from .redact import redact
from .search import Fusion, VectorIndex
from .store import Store
from .terms import fts_expression
from .types import Fragment, NewFragment, ScoredFragment, TopicSummary, TreeNode
from .vector_snapshot import snapshot_path

log = logging.getLogger(__name__)
Clock = Callable[[], float]
CANDIDATES = 100
KEYWORD_CANDIDATES = 100
PROJECT_BOOST = 1.15
MAX_LIMIT = 100
MAX_DEPTH = 8
PLACEMENT_SIMILARITY = 0.3  # auto-placement needs a real semantic neighbour
MIN_SIMILARITY = 0.15  # below this a vector hit is noise, unless keywords also match
SPREAD = 0.3  # share of a match's score lent to its temporal neighbours
SPREAD_FROM = 20  # how many of the best matches lend
TIME_FLOOR = 0.1  # weight of a fragment far outside the time the query names
TIME_EPSILON = 0.2  # lets the named time alone order fragments that match no words
# Fused scores spread wider than RRF's did, so relevance needs a little more weight to keep
# breaking near-ties in favour of what is used (RRF's top ten lay within 15% of each other).
RELEVANCE_WEIGHT = 0.25


def embedding_text(summary: str, content: str, parent_summary: str | None = None) -> str:
    """Contextual text: a fact embeds better with the name of the branch it belongs to."""
    body = summary if not content or content == summary else f"{summary}. {content}"
    return f"{parent_summary}: {body}" if parent_summary else body


@dataclass(frozen=True)
class Recall:
    fragments: list[ScoredFragment]
    keyword_only: bool  # True when no embedding model was available


class Memory:
    def __init__(self, db_path: Path | str, embedder: Embedder | None,
                 clock: Clock = time.time, project: str | None = None,
                 tz: tzinfo | None = None) -> None:
        self.db_path = Path(db_path)
        self.tz = tz  # for dates named in queries; None is the local time zone
        self.embedder = embedder
        self.clock = clock
        self.project = project
        self.index = VectorIndex(snapshot_path(self.db_path))
        self._writer: Store | None = None
        self._reader: Store | None = None
        # Keyword search runs on its own connection and thread while the query is embedded
        # and scanned: sqlite, onnxruntime and numpy all release the GIL, so on two cores the
        # slowest stage sets the latency rather than the sum of them.
        self._keyword_store: Store | None = None
        self._keyword_pool: ThreadPoolExecutor | None = None

    # -- connections --------------------------------------------------------------------
    @property
    def writer(self) -> Store:
        if self._writer is None:
            self._writer = Store(self.db_path)
        return self._writer

    @property
    def reader(self) -> Store:
        if self._reader is None:  # a read-only Store creates or migrates the file first if needed
            self._reader = Store(self.db_path, readonly=True)
        return self._reader

    def close(self) -> None:
        if self._keyword_pool is not None:
            self._keyword_pool.shutdown(wait=True)
        for store in (self._reader, self._writer, self._keyword_store):
            if store is not None:
                store.close()
        self._reader = self._writer = self._keyword_store = None
        self._keyword_pool = None

    def _keyword_search(self, expr: str) -> tuple[dict[str, float], dict[str, Fragment]]:
        """Runs on the keyword thread only, with that thread's own connection: the matches'
        BM25 scores and their rows (without text), read while the query is embedded."""
        if self._keyword_store is None:
            self._keyword_store = Store(self.db_path, readonly=True)
        found = self._keyword_store.keyword_search(expr, KEYWORD_CANDIDATES)
        return {f.id: -r for f, r in found}, {f.id: f for f, _ in found}

    def _start_keyword_search(self, expr: str
                              ) -> Future[tuple[dict[str, float], dict[str, Fragment]]]:
        if self._keyword_pool is None:
            self._keyword_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lore-fts")
        return self._keyword_pool.submit(self._keyword_search, expr)

    def embedder_ready(self) -> bool:
        return self.embedder is not None and getattr(self.embedder, "available", True)

    def embed_one(self, text: str) -> Any | None:
        if not self.embedder_ready():
            return None
        try:
            return self.embedder.embed([text])[0]  # type: ignore[union-attr]
        except Exception as exc:  # a broken model degrades to keyword search
            log.warning("embedding failed, keyword search only: %s", exc)
            return None

    # -- retrieval ----------------------------------------------------------------------
    def search(self, text: str, limit: int = 10, depth: int | None = None,
               mode: str = "hybrid", include_superseded: bool = False) -> Recall:
        """Hybrid retrieval without reinforcement. Candidates come from the vector index, FTS5
        and, when the text names a time, the fragments created then; their cosine and BM25
        scores are fused, activation spreads along temporal edges, the named time weighs in,
        and relevance and the current project blend in last. `mode` 'vector' or 'keyword'
        ranks by one signal alone, for comparisons."""
        found = self._rank_candidates(text, limit, depth, mode, include_superseded)
        return Recall(self._with_text(found.fragments), found.keyword_only)

    def _with_text(self, scored: list[ScoredFragment]) -> list[ScoredFragment]:
        """Candidates are ranked without their text (see Store.get_many); the few that are
        returned get it here."""
        full = self.reader.get_many([s.fragment.id for s in scored])
        return [replace(s, fragment=full[s.fragment.id]) for s in scored
                if s.fragment.id in full]

    def _rank_candidates(self, text: str, limit: int, depth: int | None, mode: str,
                         include_superseded: bool) -> Recall:
        """search() with fragments that lack their text."""
        store = self.reader
        # Imported here: its ~35 regexes cost the SessionStart hook, which only lists topics.
        from . import timeparse

        window = timeparse.parse(text, self.clock(), self.tz) if mode == "hybrid" else None
        words = text if window is None else window.strip(text)
        expr = fts_expression(words) if mode in ("hybrid", "keyword") else None
        keyword = self._start_keyword_search(expr) if expr else None
        qvec = self.embed_one(words) if mode in ("hybrid", "vector") else None
        cos: dict[str, float] = {}
        timed: dict[str, float] = {}
        if qvec is not None:
            self.index.refresh(store)
            if window is not None:
                self.index.load_dates(store)
            found = self.index.search_many(qvec, CANDIDATES, depth, [None] if window is None
                                           else [None, (window.start, window.end)])
            cos = {i: s for i, s in found[0] if s >= MIN_SIMILARITY}
            timed = dict(found[1]) if window is not None else {}
        # The keyword thread reads its own candidates' rows (SQLite works outside the GIL);
        # this one reads the vector candidates' rows meanwhile.
        found_rows = store.get_many(list({**cos, **timed}), with_text=False, with_parent=False)
        kw, kw_rows = keyword.result() if keyword else ({}, {})
        frags = _eligible({**kw_rows, **found_rows}, depth, include_superseded)
        if qvec is not None:
            cos.update(timed)
            cos.update(self.index.similarities(qvec, [i for i in frags if i not in cos]))
        match = Fusion(mode, cos, kw, frags, qvec is None)
        scores = {fid: match(fid) for fid in frags}
        if mode == "hybrid":
            self._spread(store, scores, match, depth, include_superseded, qvec)
        if window is not None and (timed or any(window.start <= f.created_at < window.end
                                                for f in frags.values())):
            for fid, value in scores.items():
                scores[fid] = (value + TIME_EPSILON) * (
                    TIME_FLOOR + (1 - TIME_FLOOR) * window.weight(frags[fid].created_at))
        return Recall(self._rank(scores, frags, cos, limit), qvec is None)

    def _spread(self, store: Store, scores: dict[str, float], match: Fusion,
                depth: int | None, include_superseded: bool, qvec: Any | None) -> None:
        """Spreading activation at recall: the best matches lend part of their score to the
        fragments that came right before and after them (temporal edges), which is where the
        answer to a question, or the rest of a decision, usually sits."""
        lent: dict[str, float] = {}
        best = set(sorted(scores, key=scores.__getitem__, reverse=True)[:SPREAD_FROM])
        for edge in store.edges_touching(list(best), ("temporal",)):
            for fid, other in ((edge.source, edge.target), (edge.target, edge.source)):
                if fid in best:
                    lent[other] = max(lent.get(other, 0.0), scores[fid] * edge.weight)
        new = [i for i in lent if i not in match.frags]
        if new:
            match.frags.update(_eligible(store.get_many(new, with_text=False, with_parent=False),
                                         depth, include_superseded))
            if qvec is not None:
                match.cos.update(self.index.similarities(qvec, new))
        for fid, amount in lent.items():
            if fid in match.frags:
                scores[fid] = scores.get(fid, match(fid)) + SPREAD * amount

    def _rank(self, scores: dict[str, float], frags: dict[str, Fragment],
              cos: dict[str, float], limit: int) -> list[ScoredFragment]:
        """Match quality scaled to the best, blended with relevance and the project."""
        best = max(scores.values(), default=0.0)
        if best <= 0:
            return []
        scored = []
        for fid, value in scores.items():
            frag = frags[fid]
            score = rel.blend(value / best, frag.relevance_score, RELEVANCE_WEIGHT)
            if self.project and frag.project == self.project:
                score *= PROJECT_BOOST
            scored.append(ScoredFragment(frag, score, max(cos.get(fid, 0.0), 0.0)))
        scored.sort(key=lambda s: s.score, reverse=True)
        return scored[:limit]

    def query(self, topic: str, depth: int = 1, limit: int = 10,
              include_superseded: bool = False, reinforce: bool = True) -> Recall:
        """Finds the relevant branches and returns their fragments at `depth`: a matching
        fact lifts its concept, a matching topic brings its concepts."""
        _check_text(topic, "topic")
        _check_range(depth, "depth", 0, MAX_DEPTH)
        _check_range(limit, "limit", 1, MAX_LIMIT)
        hits = self._rank_candidates(topic, CANDIDATES, None, "hybrid", include_superseded)
        store = self.reader
        known = {h.fragment.id: h.fragment for h in hits.fragments}
        lifted = self._ancestors_at(store, known, depth)
        branch: dict[str, float] = {}
        sims: dict[str, float] = {}

        def credit(fid: str, score: float, sim: float) -> None:
            branch[fid] = max(branch.get(fid, 0.0), score) + 0.1 * min(branch.get(fid, 0.0), score)
            sims[fid] = max(sims.get(fid, 0.0), sim)

        broader = [h for h in hits.fragments if h.fragment.depth < depth][:10]
        below: dict[str, list[str]] = {}
        for root, child in store.descendants_at_depth([h.fragment.id for h in broader], depth,
                                                      include_superseded):
            below.setdefault(root, []).append(child)
        for hit in hits.fragments:
            frag = hit.fragment
            if frag.depth == depth:
                credit(frag.id, hit.score, hit.similarity)
            elif frag.depth > depth:
                if ancestor := lifted.get(frag.id):
                    credit(ancestor, hit.score * 0.85, hit.similarity)
            else:  # a broad match brings its descendants at `depth` (the ten best such)
                for child in below.get(frag.id, ()):
                    credit(child, hit.score * 0.7, 0.0)
        if not branch:
            return Recall([], hits.keyword_only)
        frags = {i: known[i] for i in branch if i in known}
        frags.update(store.get_many([i for i in branch if i not in known], with_text=False,
                                    with_parent=False))
        ranked = [ScoredFragment(frags[i], s, sims.get(i, 0.0)) for i, s in branch.items()
                  if i in frags and frags[i].depth == depth
                  and (include_superseded or not frags[i].superseded_by)]
        ranked.sort(key=lambda s: s.score, reverse=True)
        ranked = self._with_text(ranked[:limit])
        if reinforce:
            self.reinforce([s.fragment.id for s in ranked])
        return Recall(ranked, hits.keyword_only)

    @staticmethod
    def _ancestors_at(store: Store, known: dict[str, Fragment], depth: int
                      ) -> dict[str, str | None]:
        """For every fragment deeper than `depth`, its ancestor at `depth`: climbed one level
        at a time for all of them together (one batched read a level, not one a fragment)."""
        deeper = [fid for fid, frag in known.items() if frag.depth > depth]
        parent: dict[str, str] = store.parent_ids(deeper)
        at: dict[str, str | None] = {fid: parent.get(fid) for fid in deeper}
        for level in range(2, max((known[f].depth - depth for f in at), default=0) + 1):
            climbing: dict[str, str] = {f: p for f, p in at.items()
                                        if p and known[f].depth - depth >= level}
            parent.update(store.parent_ids(list({p for p in climbing.values()
                                                 if p not in parent})))
            for f, p in climbing.items():
                at[f] = parent.get(p)
        return at

    def explore(self, topic: str, max_depth: int = 2, reinforce: bool = True
                ) -> TreeNode | None:
        """The subtree of the best-matching topic, down to `max_depth`."""
        _check_text(topic, "topic")
        _check_range(max_depth, "max_depth", 0, MAX_DEPTH)
        recall = self.query(topic, depth=0, limit=1, reinforce=False)
        if not recall.fragments:
            return None
        root = recall.fragments[0].fragment
        if reinforce:
            self.reinforce([root.id])
        return self.subtree(root.id, max_depth)

    def subtree(self, fid: str, max_depth: int = 2) -> TreeNode:
        store = self.reader
        root = store.get(fid)
        below = store.descendant_ids(fid, max(max_depth - root.depth, 0))
        frags = store.get_many([i for i, _ in below])
        kids: dict[str, list[Fragment]] = {}
        for frag in frags.values():
            kids.setdefault(frag.parent_id or "", []).append(frag)

        def build(frag: Fragment) -> TreeNode:
            children = sorted(kids.get(frag.id, []), key=lambda f: -f.relevance_score)
            return TreeNode(frag, tuple(build(c) for c in children))

        return build(root)

    def resolve(self, fid: str) -> str:
        return self.reader.resolve_id(fid)

    def get(self, fid: str) -> Fragment:
        return self.reader.get(self.resolve(fid))

    def children(self, fid: str) -> list[Fragment]:
        store = self.reader
        ids = store.child_ids(self.resolve(fid))
        frags = store.get_many(ids)
        return [frags[i] for i in ids if i in frags]

    def parent(self, fid: str) -> Fragment | None:
        pid = self.reader.parent_id(self.resolve(fid))
        return None if pid is None else self.reader.get(pid)

    def associations(self, fid: str) -> list[tuple[Fragment, str, float]]:
        """(neighbour, edge kind, weight), strongest first, across the hierarchy."""
        store = self.reader
        fid = self.resolve(fid)
        edges = store.edges_of(fid)
        others = store.get_many([e.target if e.source == fid else e.source for e in edges])
        out = []
        for edge in edges:
            other = others.get(edge.target if edge.source == fid else edge.source)
            if other is not None:
                out.append((other, edge.kind, edge.weight))
        return out

    def topics(self, limit: int | None = None) -> list[TopicSummary]:
        """Topics, the current project's first, then by relevance; sizes are counted only for
        the `limit` returned (the SessionStart brief shows a few of hundreds)."""
        store = self.reader
        ranked = list(store.get_many(store.topic_ids(), with_text=False).values())
        ranked.sort(key=lambda f: (-(f.project == self.project and self.project is not None),
                                   -f.relevance_score))
        ids = [f.id for f in ranked[:limit]]
        full, counts = store.get_many(ids), store.descendant_counts(ids)
        return [TopicSummary(full[i], counts.get(i, 0)) for i in ids if i in full]

    # -- writes -------------------------------------------------------------------------
    def reinforce(self, ids: list[str]) -> None:
        """Reconsolidation: recalled fragments are strengthened, their neighbours (parent
        and associations) more weakly. Best effort: a busy database skips it."""
        if not ids:
            return
        now = self.clock()
        try:
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
        except Exception as exc:  # recall must not fail because reinforcement could not write
            log.warning("reinforcement skipped: %s", exc)

    def store(self, content: str, summary: str, parent_id: str | None = None,
              depth: int = 2, importance: float = 0.6, source_session: str | None = None,
              metadata: dict[str, Any] | None = None, source: str = "agent",
              vector: Any | None = None) -> Fragment:
        """Stores one fragment. With no parent, depth 0 makes a new topic; a deeper fragment
        is placed under the best-matching fragment one level up. `source` says who decided to
        keep it (types.SOURCES): the agent through store_memory, or the user ("remember"),
        whose word counts as confirmed."""
        content, summary = _check_text(content, "content"), _check_text(summary, "summary")
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
            return existing  # storing the same thing twice keeps one copy
        if vector is None:  # storing.py passes the one it compared with the siblings
            vector = self.embed_one(embedding_text(summary, content,
                                                   parent.summary if parent else None))
        new = NewFragment(content=content, summary=summary, depth=depth, importance=importance,
                          source_session=source_session, project=self.project,
                          metadata=metadata or {}, source=source,
                          confirmed_at=self.clock() if source == "remember" else None)
        fid = self.writer.insert(new, self.clock(), None if vector is None else to_blob(vector),
                                 parent.id if parent else None)
        return self.writer.get(fid)

    def backfill_embeddings(self, batch: int = 64) -> int:
        """Embeds fragments stored while no model was available. Returns how many."""
        if not self.embedder_ready():
            return 0
        done = 0
        while rows := self.writer.missing_embeddings(batch):
            texts = []
            for fid, _ in rows:
                frag = self.writer.get(fid)
                parent = self.writer.get(frag.parent_id) if frag.parent_id else None
                texts.append(embedding_text(frag.summary, frag.content,
                                            parent.summary if parent else None))
            vectors = self.embedder.embed(texts)  # type: ignore[union-attr]
            self.writer.set_embeddings([(fid, to_blob(v)) for (fid, _), v in zip(rows, vectors)])
            done += len(rows)
        return done


def _check_text(value: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be non-empty text")
    return value.strip()


def _check_range(value: int, name: str, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an integer from {low} to {high}, got {value!r}")


def _state(frag: Fragment) -> rel.MemoryState:
    return rel.MemoryState(frag.access_count, frag.decay_rate, frag.last_accessed,
                           frag.last_reinforced)


def _eligible(frags: dict[str, Fragment], depth: int | None,
              include_superseded: bool) -> dict[str, Fragment]:
    return {i: f for i, f in frags.items() if (depth is None or f.depth == depth)
            and (include_superseded or not f.superseded_by)}

