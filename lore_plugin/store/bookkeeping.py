"""Ingestion and consolidation bookkeeping: transcript watermarks, failed batches with their
backoff, the meta table, and the record of consolidation runs.

A row of ingest_failures is one byte range of a transcript. At the watermark and not parked,
it is the batch being retried with backoff. Parked, it lies behind the watermark (which moved
past it, so the rest of the transcript goes on) until someone asks for a retry; unparked
behind the watermark, it waits for the next ingestion of its transcript to retry it."""

from __future__ import annotations

import json

from .connection import Connection

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


class Bookkeeping(Connection):
    def watermark(self, file_path: str) -> int:
        return int(self._one("SELECT byte_offset FROM watermarks WHERE file_path = ?",
                             (file_path,)) or 0)

    def set_watermark(self, file_path: str, offset: int, now: float) -> None:
        with self.write():
            self.conn.execute(
                "INSERT INTO watermarks (file_path, byte_offset, last_processed) VALUES (?, ?, ?) "
                "ON CONFLICT(file_path) DO UPDATE SET byte_offset = excluded.byte_offset, "
                "last_processed = excluded.last_processed", (file_path, offset, now))

    def watermarks(self) -> dict[str, int]:
        return {r[0]: r[1] for r in self.conn.execute(
            "SELECT file_path, byte_offset FROM watermarks")}

    def record_failure(self, file_path: str, start: int, end: int, error: str, now: float,
                       backoff: float, park_after: int) -> int:
        """Returns the attempt count; the batch is parked once it reaches park_after."""
        with self.write():
            self.conn.execute(
                "INSERT INTO ingest_failures (file_path, start_offset, end_offset, last_error, "
                "first_failed, next_retry) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(file_path, start_offset) DO UPDATE SET attempts = attempts + 1, "
                "end_offset = excluded.end_offset, last_error = excluded.last_error",
                (file_path, start, end, error[:2000], now, now + backoff))
            attempts = int(self._one(
                "SELECT attempts FROM ingest_failures WHERE file_path = ? AND start_offset = ?",
                (file_path, start)))
            delay = backoff * (2 ** (attempts - 1))
            self.conn.execute(
                "UPDATE ingest_failures SET next_retry = ?, parked = ? "
                "WHERE file_path = ? AND start_offset = ?",
                (now + delay, int(attempts >= park_after), file_path, start))
        return attempts

    def failure(self, file_path: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT start_offset, attempts, next_retry, parked, last_error FROM ingest_failures "
            "WHERE file_path = ? ORDER BY start_offset LIMIT 1", (file_path,)).fetchone()
        if row is None:
            return None
        return dict(zip(("start_offset", "attempts", "next_retry", "parked", "last_error"), row))

    def failures(self, parked_only: bool = False) -> list[dict[str, Any]]:
        where = "WHERE parked = 1" if parked_only else ""
        cols = ("file_path", "start_offset", "end_offset", "attempts", "last_error",
                "next_retry", "parked")
        return [dict(zip(cols, r)) for r in self.conn.execute(
            f"SELECT {', '.join(cols)} FROM ingest_failures {where} ORDER BY first_failed")]

    def failure_at(self, file_path: str, start: int) -> dict[str, Any] | None:
        """The unparked failure of the batch that starts at `start`, if any."""
        row = self.conn.execute(
            "SELECT attempts, next_retry, last_error FROM ingest_failures WHERE file_path = ? "
            "AND start_offset = ? AND parked = 0", (file_path, start)).fetchone()
        return None if row is None else dict(zip(("attempts", "next_retry", "last_error"), row))

    def defer(self, file_path: str, start: int, end: int, error: str, now: float,
              delay: float) -> None:
        """A transient failure (rate limit, overload, timeout): wait, without an attempt."""
        with self.write():
            self.conn.execute(
                "INSERT INTO ingest_failures (file_path, start_offset, end_offset, attempts, "
                "last_error, first_failed, next_retry) VALUES (?, ?, ?, 0, ?, ?, ?) "
                "ON CONFLICT(file_path, start_offset) DO UPDATE SET last_error = "
                "excluded.last_error, next_retry = excluded.next_retry",
                (file_path, start, end, error[:2000], now, now + delay))

    def park_range(self, file_path: str, start: int, end: int, now: float) -> None:
        """The batch [start, end) is set aside and the watermark moves past it, at once."""
        with self.write():
            self.conn.execute(
                "UPDATE ingest_failures SET parked = 1, end_offset = ? WHERE file_path = ? "
                "AND start_offset = ?", (end, file_path, start))
            self.set_watermark(file_path, end, now)

    def queued_ranges(self, file_path: str) -> list[tuple[int, int]]:
        """Ranges behind the watermark that were unparked for a retry, in file order."""
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT start_offset, end_offset FROM ingest_failures WHERE file_path = ? AND "
            "parked = 0 AND start_offset < (SELECT coalesce(max(byte_offset), 0) FROM "
            "watermarks WHERE file_path = ?) ORDER BY start_offset", (file_path, file_path))]

    def shrink_range(self, file_path: str, start: int, done_to: int) -> None:
        """The part of a range up to `done_to` is done: the rest stays, or the row goes."""
        with self.write():
            self.conn.execute("DELETE FROM ingest_failures WHERE file_path = ? AND "
                              "start_offset = ? AND end_offset <= ?", (file_path, start, done_to))
            self.conn.execute("UPDATE OR REPLACE ingest_failures SET start_offset = ? WHERE "
                              "file_path = ? AND start_offset = ?", (done_to, file_path, start))

    def repark(self, file_path: str, start: int, error: str) -> None:
        with self.write():
            self.conn.execute(
                "UPDATE ingest_failures SET parked = 1, attempts = attempts + 1, last_error = ? "
                "WHERE file_path = ? AND start_offset = ?", (error[:2000], file_path, start))

    def unpark(self, file_path: str, now: float) -> int:
        with self.write():
            self.conn.execute("UPDATE ingest_failures SET parked = 0, attempts = 0, "
                              "next_retry = ? WHERE file_path = ? AND parked = 1",
                              (now, file_path))
            return self.conn.changes()

    def clear_failure_from(self, file_path: str, start: int) -> None:
        """A batch from `start` succeeded: its failure row goes; parked or queued ranges
        (always behind it) stay."""
        with self.write():
            self.conn.execute("DELETE FROM ingest_failures WHERE file_path = ? AND "
                              "start_offset >= ? AND parked = 0", (file_path, start))

    def clear_failure(self, file_path: str) -> None:
        with self.write():
            self.conn.execute("DELETE FROM ingest_failures WHERE file_path = ?", (file_path,))

    def unpark_all(self, now: float) -> int:
        with self.write():
            self.conn.execute(
                "UPDATE ingest_failures SET parked = 0, attempts = 0, next_retry = ?", (now,))
            return self.conn.changes()

    def get_meta(self, key: str) -> str | None:
        return self._one("SELECT value FROM meta WHERE key = ?", (key,))

    def set_meta(self, key: str, value: str) -> None:
        with self.write():
            self.conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))

    def record_consolidation(self, started: float, finished: float, dry_run: bool,
                             report: dict[str, Any]) -> None:
        with self.write():
            self.conn.execute(
                "INSERT INTO consolidation_runs (started_at, finished_at, dry_run, report) "
                "VALUES (?, ?, ?, ?)", (started, finished, int(dry_run), json.dumps(report)))
            if not dry_run:
                self.set_meta("last_consolidation", repr(finished))

    def consolidation_reports(self) -> list[tuple[int, str]]:
        """(run id, report JSON) of every recorded consolidation run."""
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT id, report FROM consolidation_runs ORDER BY id")]

    def set_consolidation_reports(self, reports: Sequence[tuple[int, str]]) -> None:
        with self.write():
            self.conn.executemany("UPDATE consolidation_runs SET report = ? WHERE id = ?",
                                  [(text, rid) for rid, text in reports])

    def last_consolidation(self) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT started_at, finished_at, report FROM consolidation_runs WHERE dry_run = 0 "
            "ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            return None
        return {"started_at": row[0], "finished_at": row[1], "report": json.loads(row[2])}
