"""The query engine: recall, explore, traverse, store and topics, with reinforcement.
This is what the MCP tools and the CLI call. Reads go through a read-only connection;
reinforcement and stores are short write transactions, and embedding happens outside them."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from ..core import relevance as rel
from ..core.types import Fragment, ScoredFragment, TopicSummary, TreeNode
from ..store import Store
from . import dated
from .copy_chains import collapse, copying
from .cue_closeness import cue_closeness
from .fusion import Fusion, keyword_coverage
from .memory_base import (
    BROUGHT_DOWN,
    CANDIDATES,
    COVERAGE_FROM,
    KEYWORD_CANDIDATES,
    MAX_DEPTH,
    MAX_LIMIT,
    MIN_SIMILARITY,
    PLACEMENT_SIMILARITY,
    PROJECT_BOOST,
    RELEVANCE_WEIGHT,
    SPREAD,
    SPREAD_FROM,
    SPREAD_TO,
    TIME_EPSILON,
    TIME_FLOOR,
    Clock,
    KeywordHits,
    Recall,
    _check_range,
    _check_text,
    embedding_text,
)
from .memory_writes import Writes
from .terms import fts_expression, keyword_terms

# What callers import from here: the engine and the names they share with it.
__all__ = ["MAX_DEPTH", "MAX_LIMIT", "PLACEMENT_SIMILARITY", "Clock", "Memory", "Recall",
           "embedding_text"]


class Memory(Writes):
    """Retrieval (hybrid search, query at a depth, explore) and navigation over the memory;
    the connections come from MemoryBase and the writes from Writes."""

    def _keyword_search(self, expr: str) -> KeywordHits:
        """Runs on the keyword thread only, with that thread's own connection: the matches'
        BM25 scores and their rows (without text), read while the query is embedded, and the
        tokens of the best of them, which say how much of the query each holds."""
        store = self.keyword_store()
        with self.session(store):
            along = getattr(store, "keyword_search_tokens", None)  # one round trip (hub)
            found, tokens = (along(expr, KEYWORD_CANDIDATES) if along else
                             (store.keyword_search(expr, KEYWORD_CANDIDATES), None))
            scores = {f.id: -r for f, r in found}
            best = sorted(scores, key=scores.__getitem__, reverse=True)[:COVERAGE_FROM]
            if tokens is not None:
                return KeywordHits(scores, {f.id: f for f, _ in found},
                                   {i: tokens[i] for i in best if i in tokens})
            return KeywordHits(scores, {f.id: f for f, _ in found},
                               store.fragment_tokens(best) if best else {})

    def _start_keyword_search(self, expr: str) -> Future[KeywordHits]:
        if self._keyword_pool is None:
            self._keyword_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lore-fts")
        return self._keyword_pool.submit(self._keyword_search, expr)

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

    def search_distinct(self, text: str, limit: int, widen: int) -> Recall:
        """search() across depths whose hits are each a different answer: a heading that only
        copies a hit below it (copy_chains.py) gives that hit its place, and the hits after
        fill in. Ranked `widen` times as deep; only when the first `limit` hold a copy in
        text are the others' text and the parents between them read."""
        found = self._rank_candidates(text, limit * widen, None, "hybrid", False)
        hits = self._with_text(found.fragments[:limit])
        if copying(hits):
            hits = collapse(self.reader, hits + self._with_text(found.fragments[limit:]), limit)
        return Recall(hits, found.keyword_only)

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
        from ..core import timeparse

        window = timeparse.parse(text, self.clock(), self.tz) if mode == "hybrid" else None
        words = text if window is None else window.strip(text)
        expr = fts_expression(words) if mode in ("hybrid", "keyword") else None
        keyword = self._start_keyword_search(expr) if expr else None
        qvec = self.embed_one(words) if mode in ("hybrid", "vector") else None
        cos: dict[str, float] = {}
        timed: dict[str, float] = {}
        if qvec is not None:
            self.index.refresh(store)
            getattr(self.index, "take_rows", dict)()  # rows read by earlier searches: stale
            if window is not None:
                self.index.load_dates(store)
            found = self.index.search_many(qvec, CANDIDATES, depth, [None] if window is None
                                           else [None, (window.start, window.end)])
            cos = {i: s for i, s in found[0] if s >= MIN_SIMILARITY}
            timed = dict(found[1]) if window is not None else {}
        # Knowledge whose text names the time asked about ("2025-01-10 | deployed ..."),
        # whenever it was stored.
        written = ({} if window is None
                   else dated.candidates(store, self.index, window, qvec, self.tz))
        # The keyword thread reads its own candidates' rows (SQLite works outside the GIL);
        # this one reads the vector candidates' rows meanwhile.
        wanted = {**cos, **timed, **written}
        # A store that searches vectors itself read the rows of its hits along (hub spaces).
        read = {i: f for i, f in getattr(self.index, "take_rows", dict)().items() if i in wanted}
        found_rows = {**read, **store.get_many([i for i in wanted if i not in read],
                                               with_text=False, with_parent=False)}
        # The query terms' document frequencies, read here while the keyword thread searches.
        stats = store.term_statistics(keyword_terms(words)) if keyword else (0, {})
        hits = keyword.result() if keyword else KeywordHits({}, {}, {})
        kw, kw_rows = hits.scores, hits.rows
        coverage = keyword_coverage(stats[1], stats[0], hits.tokens)
        frags = _eligible({**kw_rows, **found_rows}, depth, include_superseded)
        if qvec is not None:
            cos.update(timed)
            cos.update(self.index.similarities(qvec, [i for i in frags if i not in cos]))
        # Ranked by the closer of the note and its closest cue (cue_closeness): a question
        # in other words is often worded like a way of asking for the note. The reported
        # similarity stays the note's own cosine.
        near = cue_closeness(store, qvec, cos, list(frags)) if mode == "hybrid" else cos
        match = Fusion(mode, near, kw, frags, qvec is None,
                       max((coverage.get(i, 0.0) for i in frags), default=0.0), coverage)
        scores = {fid: match(fid) for fid in frags}
        if mode == "hybrid":
            self._spread(store, scores, match, depth, include_superseded, qvec)
        if window is not None and (timed or written or any(
                window.start <= f.created_at < window.end for f in frags.values())):
            for fid, value in scores.items():
                when = max([window.weight(frags[fid].created_at)]
                           + [dated.period_weight(window, p, self.tz)
                              for p in written.get(fid, ())])
                scores[fid] = (value + TIME_EPSILON) * (TIME_FLOOR + (1 - TIME_FLOOR) * when)
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
                # Lent as much as the keyword match is trusted (a query whose words only brush
                # the memory makes its best matches' neighbours noise), and in full only to a
                # neighbour that matches the query itself somewhat: one that matches nothing
                # pushed real matches out of the peer corpus's top 5.
                own = scores.get(fid, match(fid))
                scores[fid] = own + SPREAD * amount * match.trust * min(own / SPREAD_TO, 1.0)

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
        with self.session(self.reader):
            recall = self._query(topic, depth, limit, include_superseded)
        if reinforce:
            self.reinforce([s.fragment.id for s in recall.fragments])
        return recall

    def _query(self, topic: str, depth: int, limit: int, include_superseded: bool) -> Recall:
        """query() without its reinforcement."""
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
                    credit(child, hit.score * BROUGHT_DOWN, 0.0)
        if not branch:
            return Recall([], hits.keyword_only)
        frags = {i: known[i] for i in branch if i in known}
        frags.update(store.get_many([i for i in branch if i not in known], with_text=False,
                                    with_parent=False))
        ranked = [ScoredFragment(frags[i], s, sims.get(i, 0.0)) for i, s in branch.items()
                  if i in frags and frags[i].depth == depth
                  and (include_superseded or not frags[i].superseded_by)]
        ranked.sort(key=lambda s: s.score, reverse=True)
        return Recall(self._with_text(ranked[:limit]), hits.keyword_only)

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


def _eligible(frags: dict[str, Fragment], depth: int | None,
              include_superseded: bool) -> dict[str, Fragment]:
    return {i: f for i, f in frags.items() if (depth is None or f.depth == depth)
            and (include_superseded or not f.superseded_by)}

