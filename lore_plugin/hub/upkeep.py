"""What the consolidation cycle (consolidation/cycle.py) reads and writes in one hub space,
by store/decay.py's, store/edges.py's and store/merging.py's names and meaning: every
fragment's relevance inputs as numbers, scores written back unless recall touched them
meanwhile, the topics' and concepts' vectors, undirected associative links, their decay,
the activity under each parent, and the space's own consolidation schedule (meta).

`seq` plays SQLite's rowid. Each write is one short transaction, and the bulk ones are one
statement over arrays (unnest): a cycle on a remote hub pays a round trip per batch, not per
row."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..core.cues import join_cues
from ..store.connection import new_id
from .fragments import Fragments
from .state import STATE_JOIN, joined
from .vectors import vector_blob

LAST_RUN = "last_consolidation"  # meta: when the last real cycle of this space finished
LAST_REPORT = "last_consolidation_report"  # meta: its report (JSON)
RELEVANCE_BATCH = 1000  # relevance updates per transaction (see set_relevance_if_unchanged)
_WRITER = ("(%(s)s = ANY ((SELECT lore_spaces('write'))::text[]) OR "
           "coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false))")


class Upkeep(Fragments):
    # The rule of three needs the failures extraction records; the hub keeps none (yet), so
    # the cycle says it skipped that phase here rather than pretend it found nothing.
    records_failures = False

    # -- phase 0: relevance -----------------------------------------------------------------
    def relevance_table(self) -> list[tuple[Any, ...]]:
        """(seq, importance, access_count, decay_rate, last_reinforced, created_at, depth,
        relevance_score) for every fragment of the space: all numbers, for one array."""
        columns = joined("seq, importance, access_count, decay_rate, last_reinforced, "
                         "created_at, depth, relevance_score")
        return [tuple(r) for r in self._all(
            f"SELECT {columns} FROM fragments f {STATE_JOIN} WHERE f.space = %s", (self.space,))]

    def set_relevance_if_unchanged(self, rows: Sequence[tuple[float, int, float, int]]) -> int:
        """(score, seq, last_reinforced, access_count): a fragment recalled since the caller
        read it keeps the score recall gave it. Returns how many were updated.

        The scores live in fragment_state (migration 5), a narrow row with no vector: the
        update is HOT and no index takes an entry. When they sat in the row with the 2 KB
        vector, HNSW's index took one per row (100 s for 10K rows against 1 s without it)
        and the phase wrote 100 rows per transaction so that a recall never waited long.
        RELEVANCE_BATCH rows now take some tens of milliseconds: a concurrent recall waits
        that long at most, and a cycle killed midway keeps the batches it committed (the
        next cycle recomputes every score anyway)."""
        if not rows:
            return 0
        by_seq = {int(r[0]): r[1] for r in self._all(  # one read: a hashed = ANY
            "SELECT seq, id FROM fragments WHERE space = %s AND seq = ANY(%s)",
            (self.space, [int(r[1]) for r in rows]))}
        known = [(by_seq[int(seq)], score, reinforced, count)
                 for score, seq, reinforced, count in rows if int(seq) in by_seq]
        updated = 0
        for start in range(0, len(known), RELEVANCE_BATCH):
            ids, score, reinforced, count = (list(c) for c in zip(
                *known[start:start + RELEVANCE_BATCH]))
            updated += self._atomic(lambda ids=ids, score=score, reinforced=reinforced,  # type: ignore[misc]
                                    count=count: self._run(
                "UPDATE fragment_state s SET relevance_score = u.score FROM unnest(%s::text[], "
                "%s::float8[], %s::float8[], %s::int[]) AS u(id, score, reinforced, n) "
                "WHERE s.space = %s AND s.id = u.id AND s.last_reinforced = u.reinforced "
                "AND s.access_count = u.n", (ids, score, reinforced, count, self.space)))
        return updated

    def ids_by_rowid(self, rowids: Sequence[int]) -> dict[int, str]:
        if not rowids:
            return {}
        return {int(r[0]): r[1] for r in self._all(
            "SELECT seq, id FROM fragments WHERE space = %s AND seq = ANY(%s)",
            (self.space, [int(r) for r in rowids]))}

    # -- phases 1 and 2: vectors of topics and of their children ----------------------------
    def topic_vectors(self) -> list[tuple[str, int, str, float, bytes]]:
        """(id, seq, name, created_at, embedding) of every live, embedded topic."""
        return [(r[0], int(r[1]), r[2], r[3], vector_blob(r[4])) for r in self._all(
            "SELECT id, seq, summary, created_at, embedding::real[] FROM fragments WHERE "
            "space = %s AND depth = 0 AND superseded_by IS NULL AND embedding IS NOT NULL "
            "ORDER BY created_at, seq", (self.space,))]

    def child_vectors(self, parent_ids: Sequence[str]) -> list[tuple[str, str, str, bytes]]:
        """(parent id, id, summary, embedding) of the live, embedded children of the parents."""
        if not parent_ids:
            return []
        return [(r[0], r[1], r[2], vector_blob(r[3])) for r in self._all(
            "SELECT e.source, f.id, f.summary, f.embedding::real[] FROM edges e JOIN fragments "
            "f ON f.space = e.space AND f.id = e.target WHERE e.space = %s AND "
            "e.kind = 'hierarchical' AND e.source = ANY(%s) AND f.superseded_by IS NULL AND "
            "f.embedding IS NOT NULL ORDER BY f.created_at, f.seq",
            (self.space, list(parent_ids)))]

    def child_activity(self) -> list[tuple[str, int, str, int, float, float]]:
        """(parent id, depth, metadata JSON, children, first and last time a child was
        attached) for every live fragment of the space that has children."""
        return [tuple(r) for r in self._all(  # type: ignore[misc]
            "SELECT a.source, p.depth, p.metadata, a.n, a.first, a.last FROM (SELECT source, "
            "count(*) AS n, min(created_at) AS first, max(created_at) AS last FROM edges "
            "WHERE space = %(s)s AND kind = 'hierarchical' GROUP BY source) a JOIN fragments p "
            "ON p.space = %(s)s AND p.id = a.source WHERE p.superseded_by IS NULL",
            {"s": self.space})]

    def merge_topic(self, victim: str, survivor: str, now: float) -> int | None:
        """One transaction: the victim's children move to the survivor, its associative edges
        follow them, the survivor's cues become its own joined with the victim's, and the
        survivor supersedes it (store/merging.py's merge). Returns how many children moved,
        or None when either topic stopped being live since the caller looked (both rows are
        locked first, so a concurrent supersession or cue write waits or is seen)."""
        with self.write():
            cues = {r[0]: r[1] for r in self._all(
                "SELECT id, cues FROM fragments WHERE space = %s AND id = ANY(%s) AND "
                "superseded_by IS NULL ORDER BY id FOR UPDATE", (self.space, [victim, survivor]))}
            if len(cues) != 2:
                return None
            both = join_cues(cues[survivor], cues[victim])
            if both != cues[survivor]:
                self.update_text(survivor, cues=both)
            moved = self.reparent_children(victim, survivor, now)
            self.upsert_associative([(survivor, b if a == victim else a, w)
                                     for a, b, w in self.associative_of(victim)
                                     if survivor not in (a, b)], now)
            self._run("DELETE FROM edges WHERE space = %s AND kind = 'associative' AND "
                      "(source = %s OR target = %s)", (self.space, victim, victim))
            self.supersede(victim, survivor, now)
        return moved

    # -- associative links ------------------------------------------------------------------
    def associative_pairs(self) -> set[frozenset[str]]:
        return {frozenset((r[0], r[1])) for r in self._all(
            "SELECT source, target FROM edges WHERE space = %s AND kind = 'associative'",
            (self.space,))}

    def associative_of(self, fid: str) -> list[tuple[str, str, float]]:
        """(source, target, weight) of `fid`'s associative edges, either way round."""
        return [(r[0], r[1], r[2]) for r in self._all(
            "SELECT source, target, weight FROM edges WHERE space = %s AND kind = "
            "'associative' AND (source = %s OR target = %s) ORDER BY source, target",
            (self.space, fid, fid))]

    def upsert_associative(self, pairs: Sequence[tuple[str, str, float]], now: float) -> int:
        """Undirected associative edges: an edge in either direction keeps the larger weight,
        a missing one is created (when both ends still exist). One statement; returns how
        many were new."""
        strongest: dict[frozenset[str], tuple[str, str, float]] = {}
        for a, b, weight in pairs:  # one row per pair: a statement may touch a row once
            key = frozenset((a, b))
            if a != b and (key not in strongest or weight > strongest[key][2]):
                strongest[key] = (a, b, weight)
        if not strongest:
            return 0
        a_ids, b_ids, weights = (list(c) for c in zip(*strongest.values()))
        params = {"s": self.space, "a": a_ids, "b": b_ids, "w": weights, "now": now,
                  "ids": [new_id() for _ in a_ids]}
        return self._atomic(lambda: self._run(
            "WITH p AS (SELECT * FROM unnest(%(a)s::text[], %(b)s::text[], %(w)s::float8[], "
            "%(ids)s::text[]) AS p(a, b, w, id)), "
            "old AS (UPDATE edges e SET weight = greatest(e.weight, p.w) FROM p WHERE "
            "e.space = %(s)s AND e.kind = 'associative' AND ((e.source = p.a AND e.target = p.b)"
            " OR (e.source = p.b AND e.target = p.a)) RETURNING p.a, p.b) "
            "INSERT INTO edges (space, id, source, target, kind, weight, created_at) "
            "SELECT %(s)s, p.id, p.a, p.b, 'associative', p.w, %(now)s FROM p "
            "WHERE NOT EXISTS (SELECT 1 FROM old WHERE old.a = p.a AND old.b = p.b) "
            "AND EXISTS (SELECT 1 FROM fragments f WHERE f.space = %(s)s AND f.id = p.a) "
            "AND EXISTS (SELECT 1 FROM fragments f WHERE f.space = %(s)s AND f.id = p.b) "
            "ON CONFLICT (space, source, target, kind) DO UPDATE SET "
            "weight = greatest(edges.weight, excluded.weight)", params))

    # -- phase 5: decay ---------------------------------------------------------------------
    def decay_edges(self, kind: str, factor: float, prune_below: float) -> tuple[int, int]:
        with self.write():
            decayed = self._run("UPDATE edges SET weight = weight * %s WHERE space = %s AND "
                                "kind = %s", (factor, self.space, kind))
            pruned = self._run("DELETE FROM edges WHERE space = %s AND kind = %s AND "
                               "weight < %s", (self.space, kind, prune_below))
        return decayed, pruned

    def edge_decay_preview(self, factor: float, prune_below: float) -> tuple[int, int]:
        """(associative edges, how many a decay by `factor` would prune), without writing."""
        row = self._all("SELECT count(*), count(*) FILTER (WHERE weight * %s < %s) FROM edges "
                        "WHERE space = %s AND kind = 'associative'",
                        (factor, prune_below, self.space))[0]
        return int(row[0] or 0), int(row[1] or 0)

    def weakest_associative(self, factor: float, prune_below: float,
                            limit: int) -> list[tuple[str, str, float]]:
        """(source summary, target summary, weight) of edges a decay would prune."""
        return [(r[0], r[1], r[2]) for r in self._all(
            "SELECT s.summary, t.summary, e.weight FROM edges e JOIN fragments s ON "
            "s.space = e.space AND s.id = e.source JOIN fragments t ON t.space = e.space AND "
            "t.id = e.target WHERE e.space = %s AND e.kind = 'associative' AND "
            "e.weight * %s < %s ORDER BY e.weight LIMIT %s",
            (self.space, factor, prune_below, limit))]

    # -- who may consolidate, and when it last ran ------------------------------------------
    def may_write(self) -> bool:
        """Whether this role may write the space (an owner or a member; a reader may not),
        as the row-level security policies decide it (hub/access_sql.py)."""
        return bool(self._one(f"SELECT {_WRITER}", {"s": self.space}))

    def record_consolidation(self, started: float, finished: float, dry_run: bool,
                             report: dict[str, Any]) -> None:
        """The space's schedule lives in the hub, so every machine sees one clock: a real
        run moves it, with its report beside it, in one transaction."""
        if dry_run:
            return
        self._atomic(lambda: self._run(
            "INSERT INTO meta (space, key, value) VALUES (%(s)s, %(k1)s, %(v1)s), "
            "(%(s)s, %(k2)s, %(v2)s) ON CONFLICT (space, key) DO UPDATE SET "
            "value = excluded.value", {"s": self.space, "k1": LAST_RUN, "v1": repr(finished),
                                       "k2": LAST_REPORT, "v2": json.dumps(
                                           {"started_at": started, "report": report})}))

    def last_consolidated(self) -> float | None:
        """When the space's last real cycle finished, on any machine; None if never."""
        try:
            value = self._one("SELECT value FROM meta WHERE space = %s AND key = %s",
                              (self.space, LAST_RUN))
            return float(value) if value is not None else None
        except ValueError:
            return None

    def last_consolidation(self) -> dict[str, Any] | None:
        raw = self._one("SELECT value FROM meta WHERE space = %s AND key = %s",
                        (self.space, LAST_REPORT))
        finished = self.last_consolidated()
        if raw is None or finished is None:
            return None
        stored = json.loads(raw)
        return {"started_at": stored["started_at"], "finished_at": finished,
                "report": stored["report"]}
