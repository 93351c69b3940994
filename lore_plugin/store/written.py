"""The days and periods a fragment's own text names ("2025-01-10 | deployed the Spark job"),
kept as day numbers (date.toordinal) in fragment_dates, so that time-aware recall finds
knowledge stored long after the fact. Parsed once, when the text is written."""

from __future__ import annotations

from .connection import Connection

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence


class WrittenDates(Connection):
    def _date_written(self, fid: str, summary: str, content: str, created_at: float) -> None:
        """Keeps the days the text names, inside the caller's write transaction. Relative
        expressions ("yesterday") count from the creation day, in the local time zone."""
        # Imported here: the parser's regexes would cost every hook that opens the store.
        from datetime import datetime

        from ..core.timeparse import written_dates

        text = summary if summary == content else f"{summary}\n{content}"
        today = datetime.fromtimestamp(created_at).date()
        self.conn.executemany(
            "INSERT OR IGNORE INTO fragment_dates (fragment_id, first_day, last_day) "
            "VALUES (?, ?, ?)",
            [(fid, a.toordinal(), b.toordinal()) for a, b in written_dates(text, today)])

    def _redate_written(self, fids: Sequence[str]) -> None:
        """After a text changed: its dates again from the stored text."""
        for fid in fids:
            row = self.conn.execute("SELECT summary, content, created_at FROM fragments "
                                    "WHERE id = ?", (fid,)).fetchone()
            self.conn.execute("DELETE FROM fragment_dates WHERE fragment_id = ?", (fid,))
            if row is not None:
                self._date_written(fid, *row)

    def date_written_backlog(self, batch: int = 500) -> int:
        """Dates the fragments stored before schema 6, up to the rowid its migration noted, a
        batch a transaction from where the last call stopped. Returns how many fragments it
        read; 0 when none are left."""
        with self.write():
            backlog = int(self._one("SELECT value FROM meta WHERE key = "
                                    "'written_dates_backlog'") or 0)
            done = int(self._one("SELECT value FROM meta WHERE key = 'written_dates_upto'") or 0)
            if done >= backlog:
                return 0
            rows = self.conn.execute(
                "SELECT rowid, id, summary, content, created_at FROM fragments "
                "WHERE rowid > ? AND rowid <= ? ORDER BY rowid LIMIT ?",
                (done, backlog, batch)).fetchall()
            for _, fid, summary, content, created in rows:
                self._date_written(fid, summary, content, created)
            upto = rows[-1][0] if rows else backlog
            self.conn.execute("INSERT INTO meta (key, value) VALUES ('written_dates_upto', ?) "
                              "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                              (str(upto),))
        return len(rows)

    def dated_near(self, first_day: int, last_day: int, limit: int
                   ) -> dict[str, list[tuple[int, int]]]:
        """Fragments whose text names a day or period touching [first_day, last_day] (day
        numbers), with those periods. A period is at most MAX_WRITTEN_DAYS long, which bounds
        the stretch of the index to read."""
        from ..core.timeparse import MAX_WRITTEN_DAYS

        out: dict[str, list[tuple[int, int]]] = {}
        for fid, a, b in self.conn.execute(
                "SELECT fragment_id, first_day, last_day FROM fragment_dates "
                "WHERE first_day BETWEEN ? AND ? AND last_day >= ? LIMIT ?",
                (first_day - MAX_WRITTEN_DAYS, last_day, first_day, limit)):
            out.setdefault(fid, []).append((a, b))
        return out
