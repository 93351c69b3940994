"""The LLM token ledger and the curation journal of one space, and the advisory lock that
lets one machine at a time consolidate a space."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

from ..store.curation import JOURNAL_COLUMNS
from .connection import HubConnection


class Ledger(HubConnection):
    def record_usage(self, at: float, purpose: str, project: str | None, model: str,
                     input_tokens: int, output_tokens: int, cost_usd: float | None) -> None:
        self._run("INSERT INTO llm_usage (space, machine, at, purpose, project, model, "
                  "input_tokens, output_tokens, cost_usd) VALUES (%s, %s, %s, %s, %s, %s, %s, "
                  "%s, %s)", (self.space, self.machine, at, purpose, project, model,
                              input_tokens, output_tokens, cost_usd))

    def usage_since(self, since: float) -> list[tuple[str, int, int, int, float | None]]:
        return [(r[0], int(r[1]), int(r[2]), int(r[3]), r[4]) for r in self._all(
            "SELECT purpose, count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd) "
            "FROM llm_usage WHERE space = %s AND at >= %s GROUP BY purpose ORDER BY purpose",
            (self.space, since))]

    def tokens_since(self, since: float) -> int:
        return int(self._one("SELECT coalesce(sum(input_tokens + output_tokens), 0) FROM "
                             "llm_usage WHERE space = %s AND at >= %s", (self.space, since)))

    # -- the curation journal -------------------------------------------------------------
    def journal_add(self, action: str, fid: str, label: str, undo: dict[str, Any],
                    now: float) -> int:
        return int(self._one(
            "INSERT INTO curation_journal (space, at, action, fragment_id, label, undo) "
            "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (self.space, now, action, fid, label, json.dumps(undo))))

    def journal(self, limit: int = 50) -> list[dict[str, Any]]:
        return [_entry(r) for r in self._all(
            f"SELECT {', '.join(JOURNAL_COLUMNS)} FROM curation_journal WHERE space = %s "
            "ORDER BY id DESC LIMIT %s", (self.space, limit))]

    def journal_entry(self, entry_id: int) -> dict[str, Any] | None:
        rows = self._all(f"SELECT {', '.join(JOURNAL_COLUMNS)} FROM curation_journal "
                         "WHERE space = %s AND id = %s", (self.space, entry_id))
        return _entry(rows[0]) if rows else None

    def journal_undone(self, entry_id: int, now: float) -> bool:
        """Marks an entry undone, once: False when another undo got there first."""
        return bool(self._run("UPDATE curation_journal SET undone_at = %s, undo = '{}' WHERE "
                              "space = %s AND id = %s AND undone_at IS NULL",
                              (now, self.space, entry_id)))

    # -- one consolidation at a time, across machines ---------------------------------------
    @contextlib.contextmanager
    def advisory_lock(self, name: str) -> Iterator[bool]:
        """Holds a session-level pg_try_advisory_lock on (space, name) for the block, on a
        connection of its own, and yields whether it got it: a second machine gets False at
        once rather than waiting. The lock dies with its connection, so a crashed holder
        never blocks the space."""
        key = f"lore:{self.space}:{name}"
        with self._cursor_outside() as cur:
            cur.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,))
            got = bool(cur.fetchone()[0])  # type: ignore[index]
            try:
                yield got
            finally:
                if got:
                    with contextlib.suppress(Exception):  # a dropped connection freed it
                        cur.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))

    @contextlib.contextmanager
    def _cursor_outside(self) -> Iterator[Any]:
        """A pooled connection of its own, even inside a write transaction."""
        with self.pool.connection() as conn, conn.cursor() as cur:
            yield cur


def _entry(row: Sequence[Any]) -> dict[str, Any]:
    entry = dict(zip(JOURNAL_COLUMNS, row))
    entry["undo"] = json.loads(entry["undo"] or "{}")
    return entry
