"""Cues on store_memory's journaled path (recall/store_journal.py, store/journal.py): a
request's cues are in its journal row, redacted, before its answer, so a crash between the
answer and the placement loses none; a repeat joins its cues to the note it repeats. Real
SQLite files, the real model, a real SIGKILLed process."""

from __future__ import annotations

import json
import subprocess

import pytest

from lore_plugin.recall.group_commit import group_writer
from lore_plugin.recall.group_requests import StoreRequest
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.store_journal import from_row
from lore_plugin.store import Store
from tests.conftest import PYTHON, python_env
from tests.recall.test_group_commit import FACT, database_held, numbered, until
from tests.recall.test_store_journal import CHILD, journal_rows, raw_bytes, writer_for

SECRET = "AKIA" + "L0REFAKE7Q9Z2B4W"


def cues_of(i: int) -> list[str]:
    return [f"outgoing mail gives up {i}", f"smtp patience number {i}"]


def row_cues(db, fid: str) -> str:
    store = Store(db, readonly=True)
    try:
        return str(store.execute("SELECT cues FROM fragments WHERE id = ?", (fid,))[0][0])
    finally:
        store.close()


def test_a_requests_cues_are_journaled_redacted_and_reach_its_row(memory):
    writer = writer_for(memory)
    try:
        with database_held(memory.db_path):  # placement waits: the row stays in the journal
            accepted = writer.accept(StoreRequest(
                *FACT, cues=["deploy slot", f"bucket key {SECRET}", "  deploy   SLOT "]
            )).result(timeout=60)
            (row,) = journal_rows(memory.db_path)
            assert row[4]["cues"].startswith("deploy slot\n")  # cleaned: the repeat is gone
            assert "[REDACTED" in row[4]["cues"] and SECRET not in json.dumps(row[4])
            assert SECRET.encode() not in raw_bytes(memory.db_path)
        placed = accepted.placed.result(timeout=60)
    finally:
        writer.close()
    assert placed.fragment.id == accepted.fid
    assert row_cues(memory.db_path, accepted.fid) == row[4]["cues"]


def test_a_journal_row_written_before_cues_is_placed_without_them():
    request = {"content": FACT[0], "summary": FACT[1], "parent_id": None, "depth": 2,
               "source": "agent", "importance": 0.6}
    assert from_row(1, "ab" * 16, None, request).cues == ""


def test_a_repeat_joins_its_cues_to_the_note_it_repeats(memory):
    writer = writer_for(memory)
    try:
        first = writer.submit_request(StoreRequest(*FACT, cues="deploy slot")).result(60)
        again = writer.submit_request(StoreRequest(
            *FACT, cues="when can we ship billing\ndeploy slot")).result(60)
    finally:
        writer.close()
    assert again.duplicate and again.fragment.id == first.fragment.id
    assert row_cues(memory.db_path, first.fragment.id) == "deploy slot\nwhen can we ship billing"


@pytest.mark.parametrize("point", ["group-before-commit", "journal-after-commit"])
def test_a_kill_before_placement_loses_no_acknowledged_stores_cues(point, tmp_path, embedder):
    db = tmp_path / "memory.db"
    requests = [{"content": numbered(i)[0], "summary": numbered(i)[1], "cues": cues_of(i)}
                for i in range(8)]
    done = subprocess.run([PYTHON, "-c", CHILD, str(db), json.dumps(requests)],
                          env=python_env(LORE_CRASH_AT=point), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == -9, done.stderr  # SIGKILL at the crash point
    acked = [json.loads(line) for line in done.stdout.splitlines() if line]
    left = journal_rows(db)
    assert left and all(r[4].get("cues") for r in left)
    memory = Memory(db, embedder, project="/work/project-a")
    try:
        writer = group_writer(memory)  # its start places the journal first
        until(lambda: writer.accepted_seq >= max(r[0] for r in left))
        assert writer.wait_placed(writer.accepted_seq, 120)
    finally:
        memory.close()
    assert journal_rows(db) == []
    wanted = {numbered(i)[1]: "\n".join(cues_of(i)) for i in range(8)}
    for summary, fid in acked:
        assert row_cues(db, fid) == wanted[summary]
    for _, fid, _, _, request in left:  # answered or not, what the journal held is placed
        assert row_cues(db, fid) == wanted[request["summary"]]


def test_a_store_waiting_for_placement_is_matched_by_its_cues():
    from lore_plugin.service import pending

    rows = [(1, "ab" * 16, None, 0.0, {"summary": "Deploy day", "cues": "release cadence",
                                       "content": "Deploys are on Thursdays."})]
    found = pending.matching(rows, "what is our release cadence")
    assert [p.id for p in found] == ["ab" * 16]
    assert "cadence" not in found[0].content + found[0].summary  # matched, never shown
