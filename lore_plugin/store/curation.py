"""What the viewer reads and writes beyond the engine's own methods: pages of the topic tree
with counts, supersession history, recent sessions, one parked batch's retry, and the curation
journal that makes a user's edits undoable until the next consolidation."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .fragments import Fragments

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any

JOURNAL_COLUMNS = ("id", "at", "action", "fragment_id", "label", "undo", "undone_at")


class Curation(Fragments):
    # -- the tree, a page at a time -------------------------------------------------------
    def topic_page(self, offset: int, limit: int) -> tuple[list[str], int]:
        """Live topic ids by relevance, one page, and how many there are in all."""
        total = int(self._one("SELECT count(*) FROM fragments WHERE depth = 0 "
                              "AND superseded_by IS NULL"))
        ids = [r[0] for r in self.conn.execute(
            "SELECT id FROM fragments WHERE depth = 0 AND superseded_by IS NULL "
            "ORDER BY relevance_score DESC, rowid LIMIT ? OFFSET ?", (limit, offset))]
        return ids, total

    def child_counts(self, ids: Sequence[str]) -> dict[str, int]:
        """Live direct children of each id: one probe of the edge index per id, so a page of
        the tree costs the same at 1K fragments as at 100K."""
        return {r[0]: r[1] for r in self._rows_in(
            "SELECT e.source, count(*) FROM edges e JOIN fragments f ON f.id = e.target "
            "WHERE e.kind = 'hierarchical' AND e.source IN (%s) AND f.superseded_by IS NULL "
            "GROUP BY e.source", ids)}

    def older_versions(self, fid: str) -> list[str]:
        """The fragments `fid` superseded directly, newest first."""
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM fragments WHERE superseded_by = ? ORDER BY created_at DESC", (fid,))]

    def projects(self, limit: int = 50) -> list[str]:
        """The distinct projects, hopping along the project index one value at a time: a
        DISTINCT would read all 100K index entries (10 ms) on every search page."""
        return [r[0] for r in self.conn.execute(
            "WITH RECURSIVE p(x) AS (SELECT min(project) FROM fragments UNION ALL "
            "SELECT (SELECT min(project) FROM fragments WHERE project > p.x) FROM p "
            "WHERE p.x IS NOT NULL) SELECT x FROM p WHERE x IS NOT NULL LIMIT ?", (limit,))]

    def rekey_project(self, old: str, new: str) -> int:
        """Every row of project `old` moves to `new`, in one transaction (issue 28: a
        repository once keyed by its path is keyed by its remote). Returns the fragments moved."""
        with self.write():
            self.conn.execute("UPDATE fragments SET project = ? WHERE project = ?", (new, old))
            moved = int(self.conn.changes())
            self.conn.execute("UPDATE failures SET project = ? WHERE project = ?", (new, old))
            self.conn.execute("UPDATE llm_usage SET project = ? WHERE project = ?", (new, old))
            self.conn.execute(
                "INSERT OR IGNORE INTO failure_pattern_projects (pattern_id, project) "
                "SELECT pattern_id, ? FROM failure_pattern_projects WHERE project = ?", (new, old))
            self.conn.execute("DELETE FROM failure_pattern_projects WHERE project = ?", (old,))
        return moved

    # -- activity ---------------------------------------------------------------------------
    def recent_sessions(self, limit: int) -> list[tuple[str, int, float]]:
        """(session id, fragments it added, when the last was added), latest first."""
        return [(r[0], r[1], r[2]) for r in self.conn.execute(
            "SELECT source_session, count(*), max(created_at) AS last FROM fragments "
            "WHERE source_session IS NOT NULL GROUP BY source_session ORDER BY last DESC "
            "LIMIT ?", (limit,))]

    def session_fragment_ids(self, session: str, limit: int) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM fragments WHERE source_session = ? ORDER BY created_at, rowid "
            "LIMIT ?", (session, limit))]

    def retry_batch(self, file_path: str, start: int, now: float) -> bool:
        """Unparks one failed batch so the next ingestion of its transcript tries it now."""
        with self.write():
            self.conn.execute(
                "UPDATE ingest_failures SET parked = 0, attempts = 0, next_retry = ? "
                "WHERE file_path = ? AND start_offset = ?", (now, file_path, start))
            return bool(self.conn.changes())

    # -- curation writes the engine has no method for ----------------------------------------
    def detach(self, fid: str) -> None:
        with self.write():
            self.conn.execute("DELETE FROM edges WHERE target = ? AND kind = 'hierarchical'",
                              (fid,))

    def unsupersede(self, old: str, new: str) -> bool:
        """Undoes `supersede(old, new)`; False when `old` is no longer superseded by `new`."""
        with self.write():
            self.conn.execute("UPDATE fragments SET superseded_by = NULL WHERE id = ? AND "
                              "superseded_by = ?", (old, new))
            if not self.conn.changes():
                return False
            self.conn.execute("DELETE FROM edges WHERE source = ? AND target = ? AND "
                              "kind = 'supersedes'", (new, old))
            self.bump_vector_epoch()
        return True

    def unconfirm(self, fid: str, confirmed_at: float) -> bool:
        with self.write():
            self.conn.execute("UPDATE fragments SET confirmed_at = NULL WHERE id = ? AND "
                              "confirmed_at = ?", (fid, confirmed_at))
            return bool(self.conn.changes())

    def associative_of(self, fid: str) -> list[tuple[str, str, float]]:
        """(source, target, weight) of `fid`'s associative edges, either way round."""
        return [(r[0], r[1], r[2]) for r in self.conn.execute(
            "SELECT source, target, weight FROM edges WHERE kind = 'associative' AND "
            "(source = ? OR target = ?) ORDER BY source, target", (fid, fid))]

    def set_associative(self, fid: str, edges: Sequence[Sequence[Any]], now: float) -> None:
        """Makes `fid`'s associative edges exactly `edges` (source, target, weight), as
        associative_of read them; ends that no longer exist are skipped."""
        with self.write():
            self.conn.execute("DELETE FROM edges WHERE kind = 'associative' AND "
                              "(source = ? OR target = ?)", (fid, fid))
            for source, target, weight in edges:
                if self.has_live_or_dead(source) and self.has_live_or_dead(target):
                    self.link(source, target, "associative", weight, now)

    def has_live_or_dead(self, fid: str) -> bool:
        return self._one("SELECT 1 FROM fragments WHERE id = ?", (fid,)) is not None

    # -- the journal -------------------------------------------------------------------------
    def journal_add(self, action: str, fid: str, label: str, undo: dict[str, Any],
                    now: float) -> int:
        with self.write():
            self.conn.execute(
                "INSERT INTO curation_journal (at, action, fragment_id, label, undo) "
                "VALUES (?, ?, ?, ?, ?)", (now, action, fid, label, json.dumps(undo)))
            return int(self.conn.last_insert_rowid())

    def journal(self, limit: int = 50) -> list[dict[str, Any]]:
        return [self._entry(r) for r in self.conn.execute(
            f"SELECT {', '.join(JOURNAL_COLUMNS)} FROM curation_journal ORDER BY id DESC "
            "LIMIT ?", (limit,))]

    def journal_entry(self, entry_id: int) -> dict[str, Any] | None:
        row = self.conn.execute(f"SELECT {', '.join(JOURNAL_COLUMNS)} FROM curation_journal "
                                "WHERE id = ?", (entry_id,)).fetchone()
        return None if row is None else self._entry(row)

    def journal_undone(self, entry_id: int, now: float) -> bool:
        """Marks an entry undone, once: False when another undo got there first."""
        with self.write():
            self.conn.execute("UPDATE curation_journal SET undone_at = ?, undo = '{}' "
                              "WHERE id = ? AND undone_at IS NULL", (now, entry_id))
            return bool(self.conn.changes())

    def journal_drop_undo(self, before: float | None = None,
                          fragment_ids: Sequence[str] = ()) -> None:
        """Erases what undo kept (old text among it) for entries made before `before` (a
        consolidation), and both that and the label for entries about forgotten fragments:
        forgetting must not leave a copy of their text here."""
        with self.write():
            if before is not None:
                # A supersession's undo holds two ids and no text: it outlives a consolidation.
                self.conn.execute("UPDATE curation_journal SET undo = '{}' WHERE at <= ? "
                                  "AND undo != '{}' AND action != 'supersede'", (before,))
            for chunk in range(0, len(fragment_ids), 400):
                part = list(fragment_ids[chunk:chunk + 400])
                marks = ",".join("?" * len(part))
                # The label quotes the fragment's text too: it goes with the undo data.
                self.conn.execute(
                    f"UPDATE curation_journal SET undo = '{{}}', label = action || "
                    f"' (a fragment since forgotten)' WHERE fragment_id IN ({marks}) "
                    f"OR id IN (SELECT j.id FROM curation_journal j, json_each(j.undo, "
                    f"'$.mentions') m WHERE m.value IN ({marks}))", (*part, *part))

    def flagged_for_review(self, limit: int = 5) -> tuple[int, list[tuple[str, str, str]]]:
        """Live fragments that extraction marked instead of letting a weaker claim replace
        what the user stated: how many, and the newest (id, summary, the id it contradicts)."""
        where = ("FROM fragments WHERE superseded_by IS NULL AND json_valid(metadata) "
                 "AND json_extract(metadata, '$.review.contradicts') IS NOT NULL")
        [(count,)] = self.conn.execute(f"SELECT count(*) {where}").fetchall()
        rows = self.conn.execute(
            f"SELECT id, summary, json_extract(metadata, '$.review.contradicts') {where} "
            "ORDER BY created_at DESC LIMIT ?", (limit,)).fetchall()
        return count, [(str(i), str(s), str(c)) for i, s, c in rows]

    @staticmethod
    def _entry(row: Sequence[Any]) -> dict[str, Any]:
        entry = dict(zip(JOURNAL_COLUMNS, row))
        entry["undo"] = json.loads(entry["undo"] or "{}")
        return entry
