"""The learning loops of issue 17: failures that extraction met and the recurring patterns
consolidation finds among them (the rule of three), and how often recall returned a fragment
and the assistant then used or ignored it (implicit usefulness)."""

from __future__ import annotations

from .connection import Connection

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def redacted_failure_rows(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Failure rows with their text redacted: kind, what and fix."""
    from ..safety.redact import redact

    return [(s, p, redact(k), key, redact(w), None if f is None else redact(f), e, t)
            for s, p, k, key, w, f, e, t in rows]


class Loops(Connection):
    records_failures = True  # the cycle's patterns phase reads them (a hub space keeps none)

    # -- failures and patterns --------------------------------------------------------------
    def add_failure_records(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """(session id, project, kind, kind key, what, fix, embedding blob, created_at). Meant
        to run inside the ingestor's write, with the watermark: recorded exactly once. The
        ingestor passes rows through redacted_failure_rows before it opens that write, so the
        redaction here costs nothing under the lock."""
        rows = redacted_failure_rows(rows)
        with self.write():
            self.conn.executemany(
                "INSERT INTO failures (session_id, project, kind, kind_key, what, fix, "
                "embedding, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def has_failure(self, session_id: str | None, kind: str, what: str, created_at: float
                    ) -> bool:
        """Whether this failure is recorded already (an import's duplicate check)."""
        return self._one("SELECT 1 FROM failures WHERE session_id IS ? AND kind = ? AND "
                         "what = ? AND created_at = ?",
                         (session_id, kind, what, created_at)) is not None

    def failure_records(self) -> list[tuple[Any, ...]]:
        """(id, session id, project, kind, kind key, what, fix, embedding, created_at), oldest
        first."""
        return self.conn.execute(
            "SELECT id, session_id, project, kind, kind_key, what, fix, embedding, created_at "
            "FROM failures ORDER BY created_at, id").fetchall()

    def replace_failure_patterns(self, patterns: Sequence[tuple[Any, ...]]) -> None:
        """(kind, what, fix, sessions, first_seen, last_seen, projects): the patterns are
        recomputed whole from the failures each cycle, so they replace the previous ones in
        one transaction (a reader sees either set, never half)."""
        with self.write():
            self.conn.execute("DELETE FROM failure_patterns")
            for kind, what, fix, sessions, first, last, projects in patterns:
                self.conn.execute(
                    "INSERT INTO failure_patterns (kind, what, fix, sessions, first_seen, "
                    "last_seen) VALUES (?, ?, ?, ?, ?, ?)", (kind, what, fix, sessions, first, last))
                pid = self.conn.last_insert_rowid()
                self.conn.executemany(
                    "INSERT OR IGNORE INTO failure_pattern_projects (pattern_id, project) "
                    "VALUES (?, ?)", [(pid, p) for p in projects])

    def failure_patterns(self, project: str | None, limit: int = 5) -> list[tuple[Any, ...]]:
        """(kind, what, fix, sessions) of the patterns seen in `project`, most recent first."""
        if project is None:
            return []
        return self.conn.execute(
            "SELECT p.kind, p.what, p.fix, p.sessions FROM failure_patterns p "
            "JOIN failure_pattern_projects pp ON pp.pattern_id = p.id WHERE pp.project = ? "
            "ORDER BY p.last_seen DESC LIMIT ?", (project, limit)).fetchall()

    # -- implicit usefulness ----------------------------------------------------------------
    def record_recall_use(self, returned: Sequence[str], used: Sequence[str], now: float
                          ) -> None:
        """Counts one recall of each of `returned` (full ids), used or ignored. A use resets
        the fragment's run of ignored recalls."""
        used_set = set(used)
        with self.write():
            self.conn.executemany(
                "INSERT INTO recall_use (fragment_id, returned, used, ignored_streak, updated_at) "
                "SELECT id, 1, ?, ?, ? FROM fragments WHERE id = ? "
                "ON CONFLICT(fragment_id) DO UPDATE SET returned = returned + 1, "
                "used = used + excluded.used, ignored_streak = CASE WHEN excluded.used > 0 "
                "THEN 0 ELSE ignored_streak + 1 END, updated_at = excluded.updated_at",
                [(int(f in used_set), int(f not in used_set), now, f) for f in returned])

    def ids_by_prefix(self, prefixes: Sequence[str]) -> dict[str, str]:
        """The full id of each shown (12-character) id that names exactly one fragment."""
        found: dict[str, str] = {}
        for prefix in prefixes:
            rows = self.conn.execute(
                "SELECT id FROM fragments WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
                (prefix, prefix + "\U0010ffff")).fetchall()
            if len(rows) == 1:
                found[prefix] = str(rows[0][0])
        return found

    def recall_use(self, fid: str) -> tuple[int, int, int]:
        """(times returned, times used, recalls ignored in a row since the last use)."""
        row = self.conn.execute("SELECT returned, used, ignored_streak FROM recall_use "
                                "WHERE fragment_id = ?", (fid,)).fetchone()
        return (0, 0, 0) if row is None else (int(row[0]), int(row[1]), int(row[2]))
