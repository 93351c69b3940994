"""Consolidation: the seven-phase sleep cycle of design §4.

0 relevance recomputed for every fragment (numpy, batched writes)
1 topic similarity: above merge_threshold two topics merge: the less important and less used
  (at a tie the newer) one is superseded by the other, which adopts its children; above
  similarity_threshold the pair gets an associative link (weight = similarity)
2 associative links between the concepts of linked topics (above concept_link_threshold)
3 placed headings named from what they hold, topics that gained children re-described (LLM)
4 contradictions between siblings: the older is superseded by the newer; then notes stored
  without cues given some (LLM; llm_round.py runs 3 and 4)
5 associative edges decay by edge_decay and are pruned below edge_prune_below; hierarchical,
  temporal and supersedes edges are never touched, and links re-asserted in phases 1-2 this
  cycle keep their full weight
6 true forgetting in the two tiers of relevance.forgettable; children move to the grandparent
  first, and topics are never forgotten
7 recurring failures: the rule of three over the failures extraction recorded (capture/patterns.py)

Every write is a short transaction of its own (one merge, one batch of forgetting), so a run
killed at any point leaves a consistent graph and the next run simply carries on. A dry run
plans every phase on the same data and writes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import relevance as rel
from ..core.config import Settings
from ..core.types import EMBED_BYTES, depth_name
from ..embedding.embedder import from_blob
from ..recall.render import clip
from ..recall.terms import numbers_in
from ..store import Store

if TYPE_CHECKING:  # numpy, pydantic and the LLM phases load on first use: is_overdue is cheap
    import numpy as np

    from ..embedding.embedder import Embedder
    from ..llm.client import LLM

log = logging.getLogger(__name__)
Clock = Callable[[], float]
LISTED = 50  # descriptions kept per phase in a report
CHUNK = 10_000  # relevance updates per transaction
# Stored scores are kept this close to the truth. Rewriting a row rewrites its page (the
# embedding lives in the row), so a 2-hourly cycle skips the many scores that barely moved;
# forgetting always uses the exact, freshly computed values.
RELEVANCE_TOLERANCE = 1e-3
FORGET_CHUNK = 200  # deletions per transaction
BLOCK = 1024  # topic rows per similarity block: memory stays O(BLOCK x topics)
# The tiers of relevance.forgettable, vectorised; a test keeps the two in agreement.
TIERS = ((0.02, True, 60.0), (0.01, False, 90.0))  # (relevance below, never accessed, days over)


def relevance_array(importance: np.ndarray, access_count: np.ndarray, decay_rate: np.ndarray,
                    last_reinforced: np.ndarray, now: float) -> np.ndarray:
    """relevance.relevance over whole columns at once."""
    import numpy as np

    days = np.maximum(now - last_reinforced, 0.0) / rel.DAY
    strength = 1.0 + np.log1p(np.maximum(access_count, 0))
    return importance * strength * np.exp(-decay_rate * days) + importance * rel.FLOOR_FACTOR


def forgettable_array(score: np.ndarray, access_count: np.ndarray, created_at: np.ndarray,
                      now: float) -> np.ndarray:
    """relevance.forgettable over whole columns at once."""
    import numpy as np

    age_days = (now - created_at) / rel.DAY
    mask = np.zeros(score.shape, dtype=bool)
    for below, unused, older in TIERS:
        tier = (score < below) & (age_days > older)
        mask |= tier & (access_count == 0) if unused else tier
    return mask


@dataclass
class Table:
    """Phase 0's columns, sorted by rowid, reused by phases 1 and 6."""

    rowid: np.ndarray
    score: np.ndarray
    importance: np.ndarray
    access_count: np.ndarray
    created_at: np.ndarray
    depth: np.ndarray

    def standing(self, rowid: int) -> float:
        """importance x strength: what relevance would be without the time decay. A topic
        created after phase 0 (by a concurrent ingestion) has none yet."""
        import numpy as np

        i = int(np.searchsorted(self.rowid, rowid))
        if i >= len(self.rowid) or self.rowid[i] != rowid:
            return 0.0
        return float(self.importance[i]) * rel.strength(int(self.access_count[i]))


class Run:
    def __init__(self, settings: Settings, store: Store, now: float, dry_run: bool) -> None:
        self.settings, self.store, self.now, self.dry_run = settings, store, now, dry_run
        self.report: dict[str, Any] = {"dry_run": dry_run, "phases": {}, "skipped": {}}
        self.asserted: list[tuple[str, str, float]] = []  # links re-affirmed this cycle
        self.existing: set[frozenset[str]] = set()
        self.moved: list[str] = []  # children that merges put under another topic

    def phase(self, name: str, started: float, **values: Any) -> dict[str, Any]:
        entry = {"seconds": round(time.perf_counter() - started, 4), **values}
        self.report["phases"][name] = entry
        return entry


# -- phase 0 ----------------------------------------------------------------------------------
def phase_relevance(run: Run) -> Table:
    import numpy as np

    started = time.perf_counter()
    rows = run.store.relevance_table()
    a = np.array(rows, dtype=np.float64).reshape(-1, 8)
    a = a[np.argsort(a[:, 0], kind="stable")]
    score = relevance_array(a[:, 1], a[:, 2], a[:, 3], a[:, 4], run.now)
    changed = np.flatnonzero(np.abs(score - a[:, 7]) > RELEVANCE_TOLERANCE)
    updated = 0
    if not run.dry_run:
        for start in range(0, len(changed), CHUNK):
            idx = changed[start:start + CHUNK]
            updated += run.store.set_relevance_if_unchanged(list(zip(
                score[idx].tolist(), a[idx, 0].astype(np.int64).tolist(), a[idx, 4].tolist(),
                a[idx, 2].astype(np.int64).tolist())))
    run.report["relevance_updated"] = updated if not run.dry_run else len(changed)
    run.phase("relevance", started, fragments=len(a), changed=len(changed), updated=updated)
    return Table(a[:, 0].astype(np.int64), score, a[:, 1], a[:, 2], a[:, 5],
                 a[:, 6].astype(np.int64))


# -- phase 1 ----------------------------------------------------------------------------------
def _similar_pairs(vectors: np.ndarray, threshold: float) -> list[tuple[float, int, int]]:
    import numpy as np

    pairs: list[tuple[float, int, int]] = []
    for start in range(0, len(vectors), BLOCK):
        block = vectors[start:start + BLOCK] @ vectors.T
        rows, cols = np.nonzero(block > threshold)
        for r, c in zip(rows.tolist(), cols.tolist()):
            if c > start + r:
                pairs.append((float(block[r, c]), start + r, c))
    pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
    return pairs


def _merge_undo(store: Store, victim: str, survivor: str) -> dict[str, Any]:
    """What the viewer's merge journals (maintenance/curation.py), read before the merge, so
    that `lore undo` and the viewer can undo a merge consolidation made."""
    children = store.child_ids(victim, include_superseded=True)
    return {"victim": victim, "survivor": survivor, "children": children,
            "victim_links": store.associative_of(victim),
            "survivor_links": store.associative_of(survivor),
            "survivor_cues": store.get(survivor).cues,  # the merge joins the victim's to them
            "mentions": [victim, survivor, *children], "by": "consolidation"}


def phase_topics(run: Run, table: Table) -> tuple[list[tuple[str, str, float]], dict[str, str]]:
    """Returns the link pairs (surviving topics) and victim -> survivor."""
    import numpy as np

    started = time.perf_counter()
    s = run.settings
    topics = [t for t in run.store.topic_vectors() if len(t[4]) == EMBED_BYTES]  # see doctor
    ids = [t[0] for t in topics]
    names = [t[2] for t in topics]
    standing = [table.standing(t[1]) for t in topics]
    created = [(t[3], t[1]) for t in topics]
    vectors = (np.stack([from_blob(t[4]) for t in topics]) if topics
               else np.zeros((0, 1), dtype=np.float32))
    pairs = _similar_pairs(vectors, s.similarity_threshold)
    leader = list(range(len(ids)))

    def find(i: int) -> int:
        while leader[i] != i:
            leader[i] = leader[leader[i]]
            i = leader[i]
        return i

    merges: list[tuple[int, int, float]] = []
    for sim, i, j in pairs:
        if sim <= s.merge_threshold:
            break
        ri, rj = find(i), find(j)
        if ri == rj:
            continue
        rep_sim = float(vectors[ri] @ vectors[rj])  # a merged group is judged by its survivor
        if rep_sim <= s.merge_threshold or numbers_in(names[ri]) != numbers_in(names[rj]):
            continue  # "Python 3.11 upgrade" and "Python 3.12 upgrade" are two topics
        # The more important and more used topic survives, at a tie the older one. Not the
        # current relevance: it favours whatever is newest, as that has not decayed yet, and
        # would let every fresh duplicate take over an established topic.
        if abs(standing[ri] - standing[rj]) > 1e-9:
            survivor, victim = (ri, rj) if standing[ri] > standing[rj] else (rj, ri)
        else:
            survivor, victim = (ri, rj) if created[ri] <= created[rj] else (rj, ri)
        leader[victim] = survivor
        merges.append((victim, survivor, rep_sim))
    victims = {ids[v]: ids[find(v)] for v, _, _ in merges}
    items, moved = [], 0
    for victim, survivor, sim in merges:
        if run.dry_run:
            children = len(run.store.child_ids(ids[victim], include_superseded=True))
        else:
            leaving = run.store.child_ids(ids[victim])
            with run.store.write():  # the merge and its journal entry (undoable) together
                undo = _merge_undo(run.store, ids[victim], ids[survivor])
                done = run.store.merge_topic(ids[victim], ids[survivor], run.now)
                if done is not None:
                    run.store.journal_add(
                        "merge", ids[survivor], f"consolidation merged “{clip(names[victim], 40)}"
                        f"” into “{clip(names[survivor], 40)}”", undo, run.now)
            if done is None:
                continue  # changed by another process meanwhile: the next cycle decides
            children = done
            run.moved += leaving
        moved += children
        items.append(f"'{clip(names[victim], 80)}' into '{clip(names[survivor], 80)}' "
                     f"({sim:.2f}, {children} children)")
    links_started = time.perf_counter()
    links = [(ids[i], ids[j], sim) for sim, i, j in pairs
             if sim <= s.merge_threshold and ids[i] not in victims and ids[j] not in victims]
    new = [(a, b, w) for a, b, w in links if frozenset((a, b)) not in run.existing]
    if links and not run.dry_run:
        run.store.upsert_associative(links, run.now)
    run.asserted += links
    by_id = dict(zip(ids, names))
    link_items = [f"'{clip(by_id[a], 80)}' <-> '{clip(by_id[b], 80)}' ({w:.2f})" for a, b, w in new]
    run.report["topics_merged"], run.report["children_moved"] = len(items), moved
    run.report["topic_links"] = len(new)
    run.phase("merge", started, topics=len(ids), merged=len(items), children_moved=moved,
              items=items[:LISTED])
    run.phase("topic_links", links_started, new=len(new), kept=len(links) - len(new),
              items=link_items[:LISTED])
    return links, victims


# -- phase 2 ----------------------------------------------------------------------------------
def phase_concept_links(run: Run, topic_links: list[tuple[str, str, float]],
                        victims: dict[str, str]) -> None:
    import numpy as np

    started = time.perf_counter()
    involved = {t for a, b, _ in topic_links for t in (a, b)}
    owners = {v: s for v, s in victims.items() if s in involved}  # dry run: not yet moved
    rows = run.store.child_vectors(sorted(involved | set(owners)))
    kids: dict[str, list[tuple[str, str, bytes]]] = {}
    for parent, cid, summary, blob in rows:
        if len(blob) != EMBED_BYTES:  # would not stack with the rest; `lore doctor` reports it
            continue
        kids.setdefault(owners.get(parent, parent), []).append((cid, summary, blob))
    matrices = {t: np.stack([from_blob(k[2]) for k in ks]) for t, ks in kids.items()}
    links: list[tuple[str, str, float]] = []
    names: dict[str, str] = {}
    for a, b, _ in topic_links:
        if a not in matrices or b not in matrices:
            continue
        sims = matrices[a] @ matrices[b].T
        for r, c in zip(*np.nonzero(sims > run.settings.concept_link_threshold)):
            ca, cb = kids[a][int(r)], kids[b][int(c)]
            links.append((ca[0], cb[0], float(sims[r, c])))
            names[ca[0]], names[cb[0]] = ca[1], cb[1]
    new = [(a, b, w) for a, b, w in links if frozenset((a, b)) not in run.existing]
    if links and not run.dry_run:
        run.store.upsert_associative(links, run.now)
    run.asserted += links
    run.report["concept_links"] = len(new)
    run.phase("concept_links", started, new=len(new), kept=len(links) - len(new),
              items=[f"'{clip(names[a], 80)}' <-> '{clip(names[b], 80)}' ({w:.2f})"
                     for a, b, w in new][:LISTED])


# -- phase 5 ----------------------------------------------------------------------------------
def phase_decay(run: Run) -> None:
    started = time.perf_counter()
    factor = 1.0 - run.settings.edge_decay
    floor = run.settings.edge_prune_below
    weakest = run.store.weakest_associative(factor, floor, LISTED)
    if run.dry_run:
        decayed, pruned = run.store.edge_decay_preview(factor, floor)
    else:
        with run.store.write():
            decayed, pruned = run.store.decay_edges("associative", factor, floor)
            if run.asserted:  # re-affirmed this cycle: back to full strength
                run.store.upsert_associative(run.asserted, run.now)
    run.report["edges_decayed"], run.report["edges_pruned"] = decayed, pruned
    run.phase("decay", started, decayed=decayed, pruned=pruned,
              items=[f"'{clip(a, 80)}' <-> '{clip(b, 80)}' ({w:.2f})" for a, b, w in weakest][:LISTED])


# -- phase 6 ----------------------------------------------------------------------------------
def phase_forget(run: Run, table: Table) -> None:
    import numpy as np

    started = time.perf_counter()
    mask = (table.depth > 0) & forgettable_array(table.score, table.access_count,
                                                 table.created_at, run.now)
    picked = np.flatnonzero(mask)
    picked = picked[np.lexsort((table.created_at[picked], -table.depth[picked]))]  # deepest first
    by_rowid = run.store.ids_by_rowid(table.rowid[picked].tolist())
    found = [(by_rowid[r], s) for r, s in zip(table.rowid[picked].tolist(),
                                              table.score[picked].tolist()) if r in by_rowid]
    ids = [fid for fid, _ in found]
    shown = run.store.get_many(ids[:LISTED])
    items = [f"{depth_name(f.depth)} '{clip(f.summary, 80)}' (relevance {score:.3f}, "
             f"{(run.now - f.created_at) / rel.DAY:.0f} days old"
             f"{', superseded' if f.superseded_by else ''})"
             for f, score in ((shown[i], s) for i, s in found[:LISTED] if i in shown)]
    forgotten = len(ids)
    if not run.dry_run:
        forgotten = 0
        for start in range(0, len(ids), FORGET_CHUNK):
            chunk = ids[start:start + FORGET_CHUNK]
            with run.store.write():  # re-checked inside: a recall since phase 0 saves it
                inputs = run.store.forget_inputs(chunk)
                for fid in chunk:
                    if fid not in inputs:
                        continue
                    depth, importance, count, decay, reinforced, created = inputs[fid]
                    score = rel.relevance(importance, count, decay, reinforced, run.now)
                    if depth > 0 and rel.forgettable(score, count, created, run.now):
                        forgotten += len(run.store.forget(fid, run.now))
    run.report["forgotten"] = forgotten
    run.phase("forget", started, forgotten=forgotten, candidates=len(ids), items=items)


# -- phase 7 ----------------------------------------------------------------------------------
def phase_patterns(run: Run) -> None:
    """The rule of three (issue 17) over the failures extraction recorded; a store that
    records none (a hub space) says so instead of reporting zero patterns found."""
    from ..capture.patterns import consolidate_patterns

    run.report["patterns"] = 0
    if not run.store.records_failures:
        run.report["skipped"]["patterns"] = "this store keeps no failure records"
        return
    t = time.perf_counter()
    run.report["patterns"] = run.phase("patterns", t, **consolidate_patterns(
        run.store, run.dry_run))["patterns"]


# -- the cycle --------------------------------------------------------------------------------
def consolidate(settings: Settings, store: Store, clock: Clock, llm: LLM | None = None,
                embedder: Embedder | None = None, dry_run: bool = False,
                llm_missing: str | None = None) -> dict[str, Any]:
    """Runs the seven phases and returns the report (counts at the top level, per-phase
    details under "phases", skipped phases and why under "skipped"). A real run records it;
    a dry run writes nothing and never calls the LLM."""
    started_at, started = clock(), time.perf_counter()
    run = Run(settings, store, started_at, dry_run)
    if llm is None and llm_missing is None:
        llm_missing = "no LLM available"
    run.existing = store.associative_pairs()
    table = phase_relevance(run)
    links, victims = phase_topics(run, table)
    if run.moved and embedder is not None and getattr(embedder, "available", True):
        # Their vectors embed their topic's name (embedding_text): give them the new one.
        from ..recall.memory_writes import reembed

        t = time.perf_counter()
        run.phase("reembed", t, fragments=reembed(store, embedder, run.moved))
    phase_concept_links(run, links, victims)
    from .llm_round import run_llm_phases

    run_llm_phases(run, llm, embedder, llm_missing)  # phases 3 and 4
    phase_decay(run)
    phase_forget(run, table)
    phase_patterns(run)
    run.report["duration_s"] = round(time.perf_counter() - started, 3)
    if not dry_run:
        store.record_consolidation(started_at, clock(), False, run.report)
    return run.report
