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
    bookkeeping  watermarks, ingestion failures, meta, consolidation runs
    history      the history from before Lore's first run, the LLM token ledger (on bookkeeping)
    upkeep       integrity, FTS rebuild, orphans, WAL, secure delete
    backup       export and import rows
    decay        consolidation's relevance table and edge decay
    merging      consolidation's topic-merge candidates and the merge itself
    forgetting   what to forget, and forgetting
    loops        failures and their recurring patterns, recall use (issue 17)
    curation     the viewer's tree pages, activity, and the undo journal of curation"""

from __future__ import annotations

from .backup import Backup
from .bookkeeping import Bookkeeping
from .connection import BUSY_TIMEOUT_MS, IN_CHUNK, BusyError, DatabaseError, StoreError, new_id
from .curation import Curation
from .decay import Decay
from .forgetting import Forgetting
from .fragments import Fragments
from .history import HISTORY_KEY, HISTORY_MARK, History
from .keywords import Keywords
from .loops import Loops
from .merging import Merging
from .rows import FRAGMENT_COLUMNS
from .terms import Terms
from .upkeep import Upkeep

__all__ = ["BUSY_TIMEOUT_MS", "FRAGMENT_COLUMNS", "HISTORY_KEY", "HISTORY_MARK", "IN_CHUNK",
           "BusyError", "DatabaseError", "Store", "StoreError", "new_id"]


class Store(Curation, Merging, Forgetting, Fragments, Keywords, Terms, History, Bookkeeping,
            Upkeep, Backup, Decay, Loops):
    """One connection to the memory database with every storage method (see the modules)."""
