"""Fragment rows as columns and as `Fragment` values: the one column list every SELECT of a
whole fragment uses, so a row always maps the same way."""

from __future__ import annotations

import json

# The value types (dataclasses) are imported where rows become objects, not here: the Stop
# hook opens a Store after every turn only to read one watermark, and importing dataclasses
# would cost it more than its whole budget allows.
TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..core.types import Fragment

FRAGMENT_COLUMNS = (
    "id, content, summary, depth, created_at, last_accessed, access_count, importance, "
    "decay_rate, last_reinforced, relevance_score, source_session, superseded_by, project, metadata, "
    "source, basis, confirmed_at"
)
PARENT = 18  # the index of a parent id appended after the columns
# The numbers alone: content and summary empty, metadata NULL.
FRAGMENT_NUMBERS = FRAGMENT_COLUMNS.replace("content, summary", "'', ''").replace(
    "metadata", "NULL")
# The same columns of the fragments alias f, for keyword_search's JSON rows.
FRAGMENT_JSON = ", ".join(c if c in ("''", "NULL") else f"f.{c}"
                          for c in FRAGMENT_NUMBERS.split(", "))


# Cues (core/cues.py) are read apart from these columns: only a read of one note's whole
# text wants them (a repeat adds to them, a merge joins them, export), never the search path's
# JSON, and a backend reading FRAGMENT_COLUMNS need not hold the column. The store appends
# `CUES_READ` after the parent id where it reads them.
CUES_READ = "cues"
CUES = PARENT + 1  # their index in such a row


def row_to_fragment(row: Sequence[Any], parent_id: str | None = None,
                    cues: str | None = None) -> Fragment:
    from ..core.types import Fragment
    meta = json.loads(row[14]) if row[14] and row[14] != "{}" else {}
    return Fragment(
        id=row[0], content=row[1], summary=row[2], depth=row[3], created_at=row[4],
        last_accessed=row[5], access_count=row[6], importance=row[7], decay_rate=row[8],
        last_reinforced=row[9], relevance_score=row[10], source_session=row[11],
        superseded_by=row[12], project=row[13], metadata=meta, parent_id=parent_id,
        source=row[15], basis=row[16], confirmed_at=row[17], cues=cues or "",
    )
