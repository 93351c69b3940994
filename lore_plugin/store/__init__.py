"""The storage layer: the only package that imports apsw. Every SQL statement lives here.

`Store` is the one object the rest of Lore holds: one connection, with each concern's
methods in its own module (a mixin), built on `connection.Connection`:

    connection   open, migrate, write() and read() transactions
    rows         fragment columns and rows → Fragment
    edges        link, edges of a fragment or kind, associative links
    hierarchy    parents, ancestors, children, descendants, topics (on edges)
    vectors      embedding blobs, samples, the vector epoch
    fragments    insert, get, resolve ids, update, supersede, delete (on hierarchy, vectors)
    keywords     FTS5 keyword search
    terms        query terms' tokens and document frequencies, candidates' tokens
    written      the days a fragment's text names (fragment_dates)
    cue_vector_rows  the vectors of each fragment's cues, and the rows due a fill (schema 11, 12)
    bookkeeping  watermarks, ingestion failures, meta, consolidation runs
    history      the history from before Lore's first run, the LLM token ledger (on bookkeeping)
    upkeep       integrity, FTS rebuild, orphans, WAL, secure delete
    backup       export and import rows
    decay        consolidation's relevance table and edge decay
    merging      consolidation's topic-merge candidates and the merge itself
    forgetting   what to forget, and forgetting
    loops        failures and their recurring patterns, recall use (issue 17)
    curation     the viewer's tree pages, activity, and the undo journal of curation
    database     `Store` itself, every mixin above composed on one connection
    peek         the Stop hook's watermark read, on apsw alone

The names below load on first use (PEP 562): the Stop hook imports `store.peek` after every
turn, and importing this package must not cost it the twenty modules behind `Store`."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from .connection import BUSY_TIMEOUT_MS, IN_CHUNK, BusyError, DatabaseError, StoreError, new_id
    from .database import Store
    from .history import HISTORY_KEY, HISTORY_MARK
    from .rows import FRAGMENT_COLUMNS

__all__ = ["BUSY_TIMEOUT_MS", "FRAGMENT_COLUMNS", "HISTORY_KEY", "HISTORY_MARK", "IN_CHUNK",
           "BusyError", "DatabaseError", "Store", "StoreError", "new_id"]
# Each public name and the module that defines it.
_HOMES = {"BUSY_TIMEOUT_MS": "connection", "IN_CHUNK": "connection", "BusyError": "connection",
          "DatabaseError": "connection", "StoreError": "connection", "new_id": "connection",
          "Store": "database",
          "HISTORY_KEY": "history", "HISTORY_MARK": "history", "FRAGMENT_COLUMNS": "rows"}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later reads are plain attribute reads
    return value
