"""A fragment's memory state on the hub, from the narrow `fragment_state` table (migration 5,
state_sql.py): how readers take it (a column list of `fragments f` with the state columns
read from `fragment_state s`), and how recall and the usefulness loop write it.

Same names and meaning as the SQLite store's save_memory_states (store/fragments.py),
record_recall_use and recall_use (store/loops.py)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from ..core.relevance import MemoryState
from .connection import HubConnection
from .state_sql import STATE

# Joined on the primary key of both. LEFT and coalesce: a fragment shows its born state
# (the same-named columns of `fragments`) should its state row ever be missing, rather than
# vanishing from a read (members cannot delete one; an admin's hand could).
STATE_JOIN = "LEFT JOIN fragment_state s ON s.space = f.space AND s.id = f.id"
_NAME = re.compile(r"^[a-z_]+$")


def joined(columns: str) -> str:
    """A comma-separated column list (store/rows.py's, or any plain one) as columns of
    `fragments f` joined with STATE_JOIN: the state from `s`, everything else from `f`,
    literals ('' and NULL) and expressions left as they are."""
    out = []
    for column in (c.strip() for c in columns.split(",")):
        if column in STATE:
            out.append(f"coalesce(s.{column}, f.{column})")
        elif _NAME.match(column):
            out.append(f"f.{column}")
        else:
            out.append(column)
    return ", ".join(out)


def state_of(column: str) -> str:
    """One state column, for a WHERE or an ORDER BY over `fragments f` + STATE_JOIN."""
    return f"coalesce(s.{column}, f.{column})"


class MemoryStates(HubConnection):
    def save_memory_states(self, states: dict[str, tuple[MemoryState, float]]) -> None:
        """id -> (new state, new relevance score)."""
        if not states:
            return
        columns = list(zip(*[(i, s.access_count, s.decay_rate, s.last_accessed,
                              s.last_reinforced, r) for i, (s, r) in states.items()]))

        own = not self.in_transaction()  # a caller's transaction keeps its own durability

        def work() -> None:
            # Memory state is best effort (recall skips it when it cannot write): its commit
            # need not wait for the WAL flush. A server crash may lose the last moment's
            # reinforcements, never anything else: the setting is this transaction's only.
            if own:
                self._run("SET LOCAL synchronous_commit = off")
            self._run(  # one statement, one round trip; a narrow row, so a HOT update
                "UPDATE fragment_state s SET access_count = u.n, decay_rate = u.d, "
                "last_accessed = u.a, last_reinforced = u.r, relevance_score = u.s FROM "
                "unnest(%s::text[], %s::int[], %s::float8[], %s::float8[], %s::float8[], "
                "%s::float8[]) AS u(id, n, d, a, r, s) WHERE s.space = %s AND s.id = u.id",
                (*[list(c) for c in columns], self.space))
        self._atomic(work)

    def record_recall_use(self, returned: Sequence[str], used: Sequence[str], now: float
                          ) -> None:
        """Counts one recall of each of `returned` (full ids), used or ignored. A use resets
        the fragment's run of ignored recalls. An id returned twice counts twice, as the
        SQLite store's one statement per id counts it; unknown ids are left out."""
        used_set = set(used)
        times = Counter(returned)
        if not times:
            return
        ids = list(times)
        self._atomic(lambda: self._run(  # one statement: an id appears once in it
            "UPDATE fragment_state s SET returned = s.returned + u.k, used = s.used + u.y, "
            "ignored_streak = CASE WHEN u.y > 0 THEN 0 ELSE s.ignored_streak + u.k END, "
            "use_updated_at = %s FROM unnest(%s::text[], %s::int[], %s::int[]) AS u(id, k, y) "
            "WHERE s.space = %s AND s.id = u.id",
            (now, ids, [times[i] for i in ids], [times[i] * (i in used_set) for i in ids],
             self.space)))

    def recall_use(self, fid: str) -> tuple[int, int, int]:
        """(times returned, times used, recalls ignored in a row since the last use)."""
        rows = self._all("SELECT returned, used, ignored_streak FROM fragment_state WHERE "
                         "space = %s AND id = %s", (self.space, fid))
        return (0, 0, 0) if not rows else (int(rows[0][0]), int(rows[0][1]), int(rows[0][2]))
