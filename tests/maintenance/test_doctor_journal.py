"""`lore doctor` and store_memory's journal (store/journal.py): acknowledged stores that no
writer is placing, and a journal file that cannot be read."""

from __future__ import annotations

import time

from lore_plugin.core.config import Settings
from lore_plugin.maintenance.operations import JOURNAL_STALE_S, doctor
from lore_plugin.store import Store, new_id
from lore_plugin.store.journal import StoreJournal, backlog, journal_path
from tests.conftest import python_env
from tests.maintenance.test_maintenance import run_cli

GARBAGE = b"not an SQLite database\n" * 300


def _waiting(db, received_at: float, summary: str = "Deploy approvals") -> str:
    fid = new_id()
    journal = StoreJournal(journal_path(db))
    journal.add([(fid, None, received_at,
                  {"content": "Production deploys need two approvals.", "summary": summary,
                   "parent_id": None, "depth": 2, "source": "agent", "importance": 0.6})])
    journal.close()
    return fid


def _journal_finding(settings: Settings, **kwargs):
    return next(f for f in doctor(settings, **kwargs) if f.check == "journal")


def test_doctor_says_nothing_waits_and_that_a_fresh_store_is_being_placed(tmp_path):
    settings = Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home")
    Store(settings.db_path).close()
    finding = _journal_finding(settings)
    assert finding.ok and finding.detail == "no store waiting for placement"
    _waiting(settings.db_path, time.time())
    finding = _journal_finding(settings)
    assert finding.ok and "1 store(s) waiting" in finding.detail and "being placed" in finding.detail


def test_doctor_fails_on_stores_no_writer_placed_and_fix_places_them(tmp_path, isolated_home):
    db = isolated_home / "memory.db"
    Store(db).close()
    fid = _waiting(db, time.time() - JOURNAL_STALE_S - 60)
    env = python_env()
    out = run_cli("doctor", env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    line = next(x for x in out.stdout.splitlines() if " journal " in x)
    assert line.startswith("FAIL") and "1 store(s) waiting for placement" in line
    out = run_cli("doctor", "--fix", env=env)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    line = next(x for x in out.stdout.splitlines() if " journal " in x)
    assert line.startswith("fixed") and "placed 1" in line
    store = Store(db)
    try:
        placed = store.get(fid)  # under the id its caller was given
        assert placed.summary == "Deploy approvals" and placed.depth == 2
    finally:
        store.close()
    assert backlog(db) == (0, None)
    out = run_cli("doctor", env=env)
    assert out.returncode == 0 and "no store waiting for placement" in out.stdout


def test_doctor_fix_moves_an_unreadable_journal_aside_and_keeps_it(tmp_path):
    settings = Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home")
    Store(settings.db_path).close()
    path = journal_path(settings.db_path)
    path.write_bytes(GARBAGE)
    finding = _journal_finding(settings)
    assert not finding.ok and "unreadable" in finding.detail
    finding = _journal_finding(settings, fix=True)
    assert finding.fixed and "moved aside" in finding.detail
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(path.name + ".unreadable-")]
    assert len(kept) == 1 and kept[0].read_bytes() == GARBAGE  # never deleted
    assert not path.exists()
    assert _journal_finding(settings).ok
