"""The days a fragment's text names (store/written.py's fragment_dates), for one space."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..core.timeparse import MAX_WRITTEN_DAYS, written_dates
from .connection import HubConnection


class Dates(HubConnection):
    def _date_written(self, fid: str, summary: str, content: str, created_at: float) -> None:
        """Inside the caller's write: the days the text names, relative ones counted from
        the creation day in the local time zone (as SQLite's store does)."""
        self._date_many([(fid, summary, content, created_at)])

    def _date_many(self, texts: Sequence[tuple[str, str, str, float]]) -> None:
        """(id, summary, content, created_at) of several fragments, in one batch."""
        rows = []
        for fid, summary, content, created_at in texts:
            text = summary if summary == content else f"{summary}\n{content}"
            today = datetime.fromtimestamp(created_at).date()
            rows += [(self.space, fid, a.toordinal(), b.toordinal())
                     for a, b in written_dates(text, today)]
        self._many("INSERT INTO fragment_dates (space, fragment_id, first_day, last_day) "
                   "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", rows)

    def _redate_written(self, fids: Sequence[str]) -> None:
        for fid in fids:
            rows = self._all("SELECT summary, content, created_at FROM fragments WHERE "
                             "space = %s AND id = %s", (self.space, fid))
            self._run("DELETE FROM fragment_dates WHERE space = %s AND fragment_id = %s",
                      (self.space, fid))
            if rows:
                self._date_written(fid, *rows[0])

    def date_written_backlog(self, batch: int = 500) -> int:
        """Nothing is ever behind: a hub space dates every fragment as it is written."""
        return 0

    def dated_near(self, first_day: int, last_day: int, limit: int
                   ) -> dict[str, list[tuple[int, int]]]:
        out: dict[str, list[tuple[int, int]]] = {}
        for fid, a, b in self._all(
                "SELECT fragment_id, first_day, last_day FROM fragment_dates WHERE space = %s "
                "AND first_day BETWEEN %s AND %s AND last_day >= %s LIMIT %s",
                (self.space, first_day - MAX_WRITTEN_DAYS, last_day, first_day, limit)):
            out.setdefault(fid, []).append((a, b))
        return out
