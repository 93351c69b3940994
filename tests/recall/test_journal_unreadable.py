"""A store journal file that cannot be opened (corrupt, from a newer Lore) gives one clear
line and a safe fallback: store_memory places directly and answers after placement, queries
go on, `lore status` and the service's status say so. And how much waits, for a person."""

from __future__ import annotations

import subprocess
import time

import apsw

from lore_plugin.recall.group_commit import group_writer
from lore_plugin.service import answers
from lore_plugin.service.engine import Service
from lore_plugin.service.ops import Ops
from lore_plugin.store import Store, new_id
from lore_plugin.store.journal import StoreJournal, backlog, backlog_line, journal_path
from tests.conftest import PYTHON, python_env
from tests.recall.test_group_commit import FACT

GARBAGE = b"this is not an SQLite database, it was overwritten\n" * 200


def test_a_corrupt_journal_file_falls_back_to_direct_placement(memory, caplog):
    path = journal_path(memory.db_path)
    path.write_bytes(GARBAGE)
    service = Service(memory)
    memory.embedder_ready()
    try:
        text, data = answers.store_memory(service, *FACT)
        assert not data.pending and "being placed" not in text  # placed, then answered
        assert Store(memory.db_path).get(data.id).summary == FACT[1]
        _, found = answers.query_memory(service, FACT[1], depth=2, limit=3)
        assert data.id in [f.id for f in found.fragments]
        assert "unreadable" in Ops.status(_ops(service))["journal"]
        writer = group_writer(memory)
        assert writer.acceptor.journal_error and "store journal" in writer.acceptor.journal_error
    finally:
        service.close()
    assert path.read_bytes() == GARBAGE  # left as it was, for a person to look at
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert any("places directly" in r.getMessage() for r in caplog.records)


def _ops(service: Service) -> Ops:
    ops = Ops.__new__(Ops)  # status reads only these
    ops.engine, ops.version, ops.started, ops.answered = service, "test", time.monotonic(), 0
    return ops


def test_lore_status_says_the_journal_is_unreadable_in_one_line(isolated_home):
    db = isolated_home / "memory.db"
    Store(db).close()
    journal_path(db).write_bytes(GARBAGE)
    out = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "status"], env=python_env(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr + out.stdout
    line = [x for x in out.stdout.splitlines() if x.startswith("journal")]
    assert len(line) == 1 and "unreadable" in line[0] and "after placement" in line[0], out.stdout


def test_a_journal_from_a_newer_lore_is_refused_by_name(tmp_path):
    db = tmp_path / "memory.db"
    raw = apsw.Connection(str(journal_path(db)))
    raw.execute("PRAGMA user_version=7")
    raw.close()
    assert "newer Lore" in backlog_line(db, time.time())


def test_the_backlog_counts_waiting_stores_and_the_oldest_age(tmp_path):
    db = tmp_path / "memory.db"
    assert backlog(db) == (0, None) and not journal_path(db).exists()  # none made by looking
    journal = StoreJournal(journal_path(db))
    now = time.time()
    request = {"content": "c", "summary": "s", "depth": 2}
    journal.add([(new_id(), None, now - 30, request), (new_id(), None, now - 5, request)])
    journal.close()
    assert backlog(db) == (2, now - 30)
    assert backlog_line(db, now) == "2 store(s) waiting for placement, the oldest for 30.0 s"
