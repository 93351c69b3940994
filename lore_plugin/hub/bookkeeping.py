"""Ingestion bookkeeping of one space, per machine: transcript watermarks, failed batches
with their backoff (store/bookkeeping.py explains the states), the history from before
Lore's first run, and the space's meta values. A transcript path names a file on one
machine only, so every key holds the machine as well as the space."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..store.history import HISTORY_KEY, HISTORY_MARK
from .connection import HubConnection

_FAILURE_KEY = "space = %s AND machine = %s AND file_path = %s"


class Bookkeeping(HubConnection):
    def watermark(self, file_path: str) -> int:
        return int(self._one("SELECT byte_offset FROM watermarks WHERE space = %s AND "
                             "machine = %s AND file_path = %s",
                             (self.space, self.machine, file_path)) or 0)

    def set_watermark(self, file_path: str, offset: int, now: float) -> None:
        self._atomic(lambda: self._run(
            "INSERT INTO watermarks (space, machine, file_path, byte_offset, last_processed) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (space, machine, file_path) DO UPDATE SET "
            "byte_offset = excluded.byte_offset, last_processed = excluded.last_processed",
            (self.space, self.machine, file_path, offset, now)))

    def watermarks(self) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in self._all(
            "SELECT file_path, byte_offset FROM watermarks WHERE space = %s AND machine = %s",
            (self.space, self.machine))}

    def record_failure(self, file_path: str, start: int, end: int, error: str, now: float,
                       backoff: float, park_after: int) -> int:
        """Returns the attempt count; the batch is parked once it reaches park_after."""
        with self.write():
            attempts = int(self._one(
                "INSERT INTO ingest_failures (space, machine, file_path, start_offset, "
                "end_offset, last_error, first_failed, next_retry) VALUES (%s, %s, %s, %s, %s, "
                "%s, %s, %s) ON CONFLICT (space, machine, file_path, start_offset) DO UPDATE "
                "SET attempts = ingest_failures.attempts + 1, end_offset = excluded.end_offset, "
                "last_error = excluded.last_error RETURNING attempts",
                (self.space, self.machine, file_path, start, end, error[:2000], now,
                 now + backoff)))
            self._run(f"UPDATE ingest_failures SET next_retry = %s, parked = %s WHERE "
                      f"{_FAILURE_KEY} AND start_offset = %s",
                      (now + backoff * (2 ** (attempts - 1)), int(attempts >= park_after),
                       self.space, self.machine, file_path, start))
        return attempts

    def failure(self, file_path: str) -> dict[str, Any] | None:
        rows = self._all("SELECT start_offset, attempts, next_retry, parked, last_error FROM "
                         f"ingest_failures WHERE {_FAILURE_KEY} ORDER BY start_offset LIMIT 1",
                         (self.space, self.machine, file_path))
        keys = ("start_offset", "attempts", "next_retry", "parked", "last_error")
        return dict(zip(keys, rows[0])) if rows else None

    def failures(self, parked_only: bool = False) -> list[dict[str, Any]]:
        cols = ("file_path", "start_offset", "end_offset", "attempts", "last_error",
                "next_retry", "parked")
        where = " AND parked = 1" if parked_only else ""
        return [dict(zip(cols, r)) for r in self._all(
            f"SELECT {', '.join(cols)} FROM ingest_failures WHERE space = %s AND machine = %s"
            f"{where} ORDER BY first_failed", (self.space, self.machine))]

    def failure_at(self, file_path: str, start: int) -> dict[str, Any] | None:
        rows = self._all("SELECT attempts, next_retry, last_error FROM ingest_failures WHERE "
                         f"{_FAILURE_KEY} AND start_offset = %s AND parked = 0",
                         (self.space, self.machine, file_path, start))
        return dict(zip(("attempts", "next_retry", "last_error"), rows[0])) if rows else None

    def defer(self, file_path: str, start: int, end: int, error: str, now: float,
              delay: float) -> None:
        self._atomic(lambda: self._run(
            "INSERT INTO ingest_failures (space, machine, file_path, start_offset, end_offset, "
            "attempts, last_error, first_failed, next_retry) VALUES (%s, %s, %s, %s, %s, 0, %s, "
            "%s, %s) ON CONFLICT (space, machine, file_path, start_offset) DO UPDATE SET "
            "last_error = excluded.last_error, next_retry = excluded.next_retry",
            (self.space, self.machine, file_path, start, end, error[:2000], now, now + delay)))

    def park_range(self, file_path: str, start: int, end: int, now: float) -> None:
        def work() -> None:
            self._run(f"UPDATE ingest_failures SET parked = 1, end_offset = %s WHERE "
                      f"{_FAILURE_KEY} AND start_offset = %s",
                      (end, self.space, self.machine, file_path, start))
            self.set_watermark(file_path, end, now)
        self._atomic(work)

    def queued_ranges(self, file_path: str) -> list[tuple[int, int]]:
        return [(int(r[0]), int(r[1])) for r in self._all(
            f"SELECT start_offset, end_offset FROM ingest_failures WHERE {_FAILURE_KEY} AND "
            "parked = 0 AND start_offset < (SELECT coalesce(max(byte_offset), 0) FROM "
            "watermarks w WHERE w.space = %s AND w.machine = %s AND w.file_path = %s) "
            "ORDER BY start_offset",
            (self.space, self.machine, file_path) * 2)]

    def shrink_range(self, file_path: str, start: int, done_to: int) -> None:
        key = (self.space, self.machine, file_path)

        def work() -> None:
            self._run(f"DELETE FROM ingest_failures WHERE {_FAILURE_KEY} AND start_offset = %s "
                      "AND end_offset <= %s", (*key, start, done_to))
            # SQLite's UPDATE OR REPLACE: a row already at done_to gives way.
            self._run(f"DELETE FROM ingest_failures WHERE {_FAILURE_KEY} AND start_offset = %s "
                      f"AND EXISTS (SELECT 1 FROM ingest_failures WHERE {_FAILURE_KEY} AND "
                      "start_offset = %s)", (*key, done_to, *key, start))
            self._run(f"UPDATE ingest_failures SET start_offset = %s WHERE {_FAILURE_KEY} AND "
                      "start_offset = %s", (done_to, *key, start))
        self._atomic(work)

    def repark(self, file_path: str, start: int, error: str) -> None:
        self._run(f"UPDATE ingest_failures SET parked = 1, attempts = attempts + 1, "
                  f"last_error = %s WHERE {_FAILURE_KEY} AND start_offset = %s",
                  (error[:2000], self.space, self.machine, file_path, start))

    def unpark(self, file_path: str, now: float) -> int:
        return self._run(f"UPDATE ingest_failures SET parked = 0, attempts = 0, next_retry = %s "
                         f"WHERE {_FAILURE_KEY} AND parked = 1",
                         (now, self.space, self.machine, file_path))

    def unpark_all(self, now: float) -> int:
        return self._run("UPDATE ingest_failures SET parked = 0, attempts = 0, next_retry = %s "
                         "WHERE space = %s AND machine = %s", (now, self.space, self.machine))

    def clear_failure_from(self, file_path: str, start: int) -> None:
        self._atomic(lambda: self._run(
            f"DELETE FROM ingest_failures WHERE {_FAILURE_KEY} AND start_offset >= %s AND "
            "parked = 0", (self.space, self.machine, file_path, start)))

    def clear_failure(self, file_path: str) -> None:
        self._atomic(lambda: self._run(f"DELETE FROM ingest_failures WHERE {_FAILURE_KEY}",
                                       (self.space, self.machine, file_path)))

    # -- meta and history -----------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        return self._one("SELECT value FROM meta WHERE space = %s AND key = %s",
                         (self.space, key))

    def set_meta(self, key: str, value: str) -> None:
        self._atomic(lambda: self._run(
            "INSERT INTO meta (space, key, value) VALUES (%s, %s, %s) ON CONFLICT (space, key) "
            "DO UPDATE SET value = excluded.value", (self.space, key, value)))

    def history_recorded(self) -> bool:
        return self.get_meta(f"{HISTORY_MARK}:{self.machine}") is not None

    def record_history(self, sizes: Sequence[tuple[str, int]], now: float) -> bool:
        """Once per space and machine (see store/history.py)."""
        with self.write():
            self._run("SELECT pg_advisory_xact_lock(hashtext(%s))",
                      (f"lore-history:{self.space}:{self.machine}",))
            if self.history_recorded():
                return False
            marks = self.watermarks()
            for path, end in sizes:
                if path in marks or end <= 0:
                    continue
                self._run("INSERT INTO history (space, machine, file_path, end_offset, "
                          "recorded_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                          (self.space, self.machine, path, end, now))
                self.set_watermark(path, end, now)
            self.set_meta(f"{HISTORY_MARK}:{self.machine}", repr(now))
        return True

    def history(self) -> list[tuple[str, int, int]]:
        return [(r[0], int(r[1]), int(r[2] or 0)) for r in self._all(
            "SELECT h.file_path, h.end_offset, w.byte_offset FROM history h LEFT JOIN "
            "watermarks w ON w.space = h.space AND w.machine = h.machine AND "
            "w.file_path = %s || h.file_path WHERE h.space = %s AND h.machine = %s "
            "ORDER BY h.file_path", (HISTORY_KEY, self.space, self.machine))]
