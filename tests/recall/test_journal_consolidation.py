"""Consolidation between a store's acceptance and its placement (issue 27): a journal row
whose parent was merged away or forgotten meanwhile is still placed (never dropped, never
stuck), and a repeat's reserved id follows its fragment into a merge's survivor."""

from __future__ import annotations

import time

from lore_plugin.recall.group_requests import StoreRequest
from lore_plugin.recall.memory import Memory
from lore_plugin.store import Store, new_id
from lore_plugin.store.journal import StoreJournal, journal_path
from tests.recall.test_group_commit import FACT, database_held, numbered, until
from tests.recall.test_memory import tree
from tests.recall.test_store_journal import journal_rows, writer_for


def left_in_journal(memory: Memory, rows: list[tuple[str, str, str, int]]) -> list[str]:
    """Rows an earlier process accepted and never placed: (content, summary, parent, depth)."""
    journal = StoreJournal(journal_path(memory.db_path))
    fids = [new_id() for _ in rows]
    try:
        journal.add([(fid, memory.project, time.time(), {
            "content": c, "summary": s, "parent_id": p, "depth": d, "source": "agent",
            "importance": 0.6}) for fid, (c, s, p, d) in zip(fids, rows)])
    finally:
        journal.close()
    return fids


def placed(memory: Memory) -> None:
    writer = writer_for(memory)  # its start places the journal's rows first
    try:
        until(lambda: writer.acceptor.replayed.is_set() and writer.accepted_seq > 0)
        assert writer.wait_placed(writer.accepted_seq, 120)
    finally:
        writer.close()


def test_a_pending_row_under_a_merged_topic_goes_to_the_survivor(memory):
    ids = tree(memory)
    [fid] = left_in_journal(memory, [("The dashboard's charts use visx 3.", "Dashboard charts "
                                      "use visx", ids["ui"], 1)])
    assert memory.writer.merge_topic(ids["ui"], ids["db"], time.time()) is not None
    placed(memory)
    assert journal_rows(memory.db_path) == []
    assert memory.get(fid).summary == "Dashboard charts use visx"
    assert memory.parent(fid).id == ids["db"]  # the survivor, not the superseded topic


def test_a_pending_row_whose_parent_was_forgotten_is_placed_not_dropped(memory):
    ids = tree(memory)
    [fid, child] = left_in_journal(memory, [
        ("Invoices older than 7 years are archived to cold storage.", "Invoice archive rule",
         ids["pg"], 2)])[:1] + left_in_journal(memory, [
             ("The archive job runs on Sundays.", "Archive job on Sundays", "PLACEHOLDER", 3)])
    # the second row names the first's reserved id, as a caller may right after the answer
    journal = StoreJournal(journal_path(memory.db_path))
    with journal.conn:
        journal.conn.execute("UPDATE store_journal SET request = json_set(request, "
                             "'$.parent_id', ?) WHERE fid = ?", (fid, child))
    journal.close()
    memory.writer.forget(ids["pg"], time.time())  # decay forgot the concept meanwhile
    placed(memory)
    assert journal_rows(memory.db_path) == []
    kept = memory.get(fid)
    assert kept.summary == "Invoice archive rule" and kept.depth == 2
    assert memory.parent(fid).depth == 1 and memory.parent(fid).superseded_by is None
    assert memory.parent(child).id == fid  # its own child still under it


def test_a_repeats_id_follows_its_fragment_into_the_merge_survivor(memory):
    ids = tree(memory)
    reserved = new_id()
    memory.writer.redirect(reserved, ids["ui"])
    memory.writer.merge_topic(ids["ui"], ids["db"], time.time())
    store = Store(memory.db_path)
    try:
        assert store.resolve_id(reserved) == ids["db"]
        store.delete(ids["ui"], time.time())  # the superseded topic purged later
        assert store.resolve_id(reserved) == ids["db"]  # the redirect moved on, not lost
    finally:
        store.close()


def test_a_child_and_its_waiting_parent_in_one_batch_are_both_placed(memory):
    """Both wait behind a busy writer and reach it in one batch: the parent is inserted only
    at its transaction's end, so the child is placed in a transaction after it."""
    writer = writer_for(memory)
    try:
        with database_held(memory.db_path):
            blocker = writer.accept(StoreRequest(*numbered(1))).result(timeout=60)
            until(lambda: writer.queued == 0 and not blocker.placed.done())
            parent = writer.accept(StoreRequest(*FACT)).result(timeout=60)
            child = writer.accept(StoreRequest(
                "Thursday deploys need the on-call engineer present.", "Deploy needs on-call",
                parent.fid, 3)).result(timeout=60)
            until(lambda: writer.ready == 2)  # both embedded, waiting as one group
        kid = child.placed.result(timeout=60)
    finally:
        writer.close()
    assert max(writer.batches) == 2  # they were one batch
    assert kid.fragment.id == child.fid and kid.fragment.parent_id == parent.fid
    assert journal_rows(memory.db_path) == []
