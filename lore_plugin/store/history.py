"""Cost bookkeeping (issue 15): the history from before Lore's first run, which only
`lore ingest` reads, and the ledger of LLM calls behind `lore status` and the daily budget."""

from __future__ import annotations

from .bookkeeping import Bookkeeping

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence

HISTORY_MARK = "history_recorded_at"  # meta key: set once, when Lore first ran
HISTORY_KEY = "history:"  # watermark key prefix: how far `lore ingest` has backfilled a file


class History(Bookkeeping):
    def history_recorded(self) -> bool:
        return self.get_meta(HISTORY_MARK) is not None

    def record_history(self, sizes: Sequence[tuple[str, int]], now: float) -> bool:
        """Once per database: `sizes` (transcript, end of its last complete line) become the
        history from before Lore's first run, and each watermark starts after it, so that
        neither the hooks nor the sweep read it. A transcript Lore already tracks keeps its
        watermark. False when another process recorded the history first."""
        with self.write():
            if self.history_recorded():
                return False
            marks = self.watermarks()
            for path, end in sizes:
                if path in marks or end <= 0:
                    continue
                self.conn.execute(
                    "INSERT OR IGNORE INTO history (file_path, end_offset, recorded_at) "
                    "VALUES (?, ?, ?)", (path, end, now))
                self.set_watermark(path, end, now)
            self.set_meta(HISTORY_MARK, repr(now))
        return True

    def history(self) -> list[tuple[str, int, int]]:
        """(transcript, end of its history, how far backfilling has read it)."""
        return [(r[0], int(r[1]), int(r[2] or 0)) for r in self.conn.execute(
            "SELECT h.file_path, h.end_offset, w.byte_offset FROM history h "
            "LEFT JOIN watermarks w ON w.file_path = ? || h.file_path ORDER BY h.file_path",
            (HISTORY_KEY,))]

    def record_usage(self, at: float, purpose: str, project: str | None, model: str,
                     input_tokens: int, output_tokens: int, cost_usd: float | None) -> None:
        with self.write():
            self.conn.execute(
                "INSERT INTO llm_usage (at, purpose, project, model, input_tokens, "
                "output_tokens, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (at, purpose, project, model, input_tokens, output_tokens, cost_usd))

    def usage_since(self, since: float) -> list[tuple[str, int, int, int, float | None]]:
        """Per purpose since `since`: (purpose, calls, input tokens, output tokens, cost)."""
        return [(r[0], int(r[1]), int(r[2]), int(r[3]), r[4]) for r in self.conn.execute(
            "SELECT purpose, count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd) "
            "FROM llm_usage WHERE at >= ? GROUP BY purpose ORDER BY purpose", (since,))]

    def tokens_since(self, since: float) -> int:
        return int(self._one("SELECT coalesce(sum(input_tokens + output_tokens), 0) "
                             "FROM llm_usage WHERE at >= ?", (since,)))
