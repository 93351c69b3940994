"""store_memory's answer at the journal commit, and read-your-writes while requests wait for
placement (issue 27; recall/store_journal.py).

- A store is answered once its request is durable in the store journal. When the writer had
  nothing else to do, placement follows at once and the answer waits for it (up to
  QUICK_PLACE s) to say where the fact went, as before; under load it says "stored; being
  placed" with the id reserved for it.
- A query waits (up to SETTLE s) until every store accepted before it is placed, so a fact
  just stored is found; past that bound it also lists, by keyword, the journal rows still
  waiting, marked as being placed.
- A fragment id still in the journal names a fact being placed: traverse_memory says so.

All of this is within one process's writer (the service's, shared by every session)."""

from __future__ import annotations

import logging
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ..recall import render
from ..recall.group_commit import GroupWriter, group_writer, running_writer
from ..recall.terms import keyword_terms
from ..store import StoreError
from ..store.journal import StoreJournal, journal_path
from .tool_schema import PendingOut, StoreAnswer

if TYPE_CHECKING:
    from ..recall.memory import Memory
    from ..recall.store_journal import Accepted
    from ..store.journal import JournalRow

QUICK_PLACE = 5.0  # s an idle writer's placement may take before the answer goes without it (a
# slow machine: it took milliseconds in every benchmark run, and it always waited before)
SETTLE = 2.0  # s a query waits for the stores accepted before it to be placed
MOST_PENDING = 5  # journal rows a query lists at most
_looked: weakref.WeakSet[Memory] = weakref.WeakSet()  # journal leftovers looked for
_unreadable: set[str] = set()  # journal files found unreadable (logged once each)
log = logging.getLogger(__name__)


def pending_answer(accepted: Accepted) -> tuple[str, StoreAnswer]:
    """The answer at the journal commit: the id is final (a repeat redirects it)."""
    request = accepted.request
    lines = [f"Stored [{render.short_id(accepted.fid)}] · {render.clip(request.summary, 100)}"
             " (stored; being placed)", f"id: {accepted.fid}",
             "It is durable now. Where it goes, or whether it repeats a known fragment, is "
             "decided in the background in order; the id works at once (as a parent_id, and "
             "query_memory finds it)."]
    return render.recalled("\n".join(lines)), StoreAnswer(
        id=accepted.fid, depth=request.depth, summary=request.summary,
        parent_id=request.parent_id, duplicate=False, created=[], pending=True)


def settle(memory: Memory) -> list[JournalRow]:
    """Waits until what was accepted before now is placed; the rows still waiting after
    SETTLE s (none when placement kept up)."""
    writer = running_writer(memory) or _replaying(memory)
    if writer is None:
        return []
    target = writer.accepted_seq
    if writer.wait_placed(target, SETTLE):
        return []
    journal = _opened(writer.journal_path)
    if journal is None:
        return []
    try:
        return journal.pending()
    finally:
        journal.close()


def _opened(path: Path) -> StoreJournal | None:
    """The journal, or None (said once in the log) when it cannot be opened: queries then go
    on without what waits in it, and stores are placed directly (store_journal.py)."""
    try:
        return StoreJournal(path)
    except StoreError as exc:
        if str(path) not in _unreadable:
            _unreadable.add(str(path))
            log.warning("%s", exc)
        return None


def _replaying(memory: Memory) -> GroupWriter | None:
    """No writer yet, but the journal holds an earlier process's rows: one is started now,
    which places them first (a query right after a restart must see them too). Looked at once
    per Memory: later leftovers are placed when its writer starts."""
    if memory in _looked:
        return None
    _looked.add(memory)
    path = journal_path(memory.db_path)
    if not path.exists():
        return None
    journal = _opened(path)
    if journal is None:
        return None
    try:
        left = journal.count()
    finally:
        journal.close()
    if not left:
        return None
    writer = group_writer(memory)
    writer.wait_accepted(SETTLE)  # its acceptor reads the leftovers before anything new
    return writer


def place_waiting_stores(memory: Memory, timeout: float) -> int:
    """Starts this Memory's writer, which places an earlier process's journal rows first, and
    waits (at most `timeout` s) for them to be placed (`lore doctor --fix`). Returns how many
    still wait. Safe beside a running service: a row already placed is never placed twice."""
    deadline = time.monotonic() + timeout
    writer = group_writer(memory)
    writer.wait_accepted(timeout)
    writer.wait_placed(writer.accepted_seq, max(0.0, deadline - time.monotonic()))
    journal = _opened(writer.journal_path)
    if journal is None:
        return 0
    try:
        return journal.count()
    finally:
        journal.close()


def matching(rows: list[JournalRow], topic: str) -> list[PendingOut]:
    """The waiting rows that share a keyword with the topic (their cues' words count, as
    once placed), most shared first."""
    terms = set(keyword_terms(topic))
    scored = []
    for seq, fid, _, _, request in rows:
        words = set(keyword_terms(
            f"{request['summary']} {request['content']} {request.get('cues') or ''}"))
        shared = len(terms & words)
        if shared:
            scored.append((-shared, seq, PendingOut(id=fid, summary=request["summary"],
                                                    content=render.clip(request["content"],
                                                                        300))))
    return [out for _, _, out in sorted(scored, key=lambda s: s[:2])[:MOST_PENDING]]


def pending_text(found: list[PendingOut]) -> str:
    if not found:
        return ""
    lines = [f"- [{render.short_id(p.id)}] · {p.summary}: {p.content}" for p in found]
    # The rows are stored text like any fragment's: framed as data, so none can end the frame.
    return "\n\nBeing placed (stored, not yet in the tree; the ids already work):\n" + \
        render.recalled("\n".join(lines))


def journaled(memory: Memory, fid: str) -> str | None:
    """For an id the database does not know: None if the journal does not hold it either;
    "placed" once it is, within SETTLE s; "pending" if it still waits."""
    writer = running_writer(memory)
    if writer is None:
        return None
    journal = _opened(writer.journal_path)
    if journal is None:
        return None
    try:
        row = journal.get(fid.strip().lower())
    finally:
        journal.close()
    if row is None:
        return None
    return "placed" if writer.wait_placed(row[0], SETTLE) else "pending"
