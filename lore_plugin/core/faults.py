"""Test-only crash points on the exactly-once path (the job queue, ingestion, its commit).

LORE_CRASH_AT=<point>[:<n>] makes the process SIGKILL itself the n-th time (the first when
n is left out) it reaches that point: no cleanup, no flush, the same as a machine that loses
power there. A test can then stop a worker exactly between two steps instead of hoping a
random kill lands there (tests/capture/test_crash_points.py). The variable is read once, at
import; unset, a point costs one string comparison. Standard library only, and nothing
imported until it fires: the Stop hook's path reaches the queue."""

from __future__ import annotations

import os

# Where a point sits, in the order a job passes them.
POINTS = ("after-claim", "after-llm", "after-insert", "before-watermark", "after-commit",
          "after-job")
# On the group-commit path (recall/group_commit.py): a batch written but not committed, one
# committed but not yet answered (tests/recall/test_group_commit.py), and provisional vectors
# embedded again but not yet written (recall/recontext.py).
GROUP_POINTS = ("group-before-commit", "group-after-commit", "group-before-recontext")
# Accepting into the store journal (recall/store_journal.py): committed, not yet answered
# (tests/recall/test_store_journal.py).
JOURNAL_POINTS = ("journal-after-commit",)
# On `lore unshare` (maintenance/share_moves.py): copied into the local file but still in the
# team space, and gone from the team space but not yet journaled locally
# (tests/maintenance/test_unshare_crash.py).
UNSHARE_POINTS = ("unshare-after-copy", "unshare-after-delete")
_POINT, _, _NTH = os.environ.get("LORE_CRASH_AT", "").partition(":")
_left = int(_NTH) if _NTH.isdigit() else 1


def crash_point(name: str) -> None:
    global _left
    if name != _POINT:
        return
    _left -= 1
    if _left == 0:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
