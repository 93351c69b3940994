"""The store journal: store_memory requests accepted but not yet placed (recall/store_journal.py
and group_commit.py), one row each, in their own SQLite file beside the memory database.

Why a file of its own: the group writer holds the memory database's one write lock for a
whole batch's placement (and a model call); a journal in the same file would make every
accept wait for that, which is what the journal is there to avoid. What makes a row's
placement exactly-once is not a shared transaction but its reserved id: the writer inserts the
fragment (or, for a repeat, a redirect) under that id in the memory database, atomically with
the rest of the placement, and only then deletes the row here. A row whose id the memory
database already knows was placed before a crash; replay just deletes it.

Every text here was redacted before it was written (recall/store_journal.py); the file is
owner-only, as the database is."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import apsw

from ..core.private import create_private
from .connection import BUSY_TIMEOUT_MS, StoreError

VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS store_journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    fid TEXT NOT NULL UNIQUE,
    project TEXT,
    received_at REAL NOT NULL,
    request TEXT NOT NULL
);
"""
# The request's fields, as json: content, summary, parent_id, depth, source, importance, and
# cues (core/cues.py; a row written before them has none, read as no cues).
FIELDS = ("content", "summary", "parent_id", "depth", "source", "importance", "cues")
JournalRow = tuple[int, str, "str | None", float, dict[str, Any]]  # seq, fid, project, at, request


def journal_path(db_path: Path | str) -> Path:
    """Beside the database: `memory.db` → `memory.db.storejournal` (not `-journal`, which is
    SQLite's own rollback journal's name)."""
    db = Path(db_path)
    return db.with_name(db.name + ".storejournal")


class StoreJournal:
    """One connection to the journal file (one thread at a time, as any apsw connection)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():  # owner-only from the first byte, whatever the umask
            try:
                os.close(create_private(self.path))
            except FileExistsError:
                pass  # another process made it meanwhile
        try:
            self.conn: Any = apsw.Connection(str(self.path))
            self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            # A placed row's text is deleted with zeros, not left in a free page: `lore
            # forget` promises no copy of a forgotten fragment anywhere in Lore's files.
            self.conn.execute("PRAGMA secure_delete=ON")
            version = int(self.conn.execute("PRAGMA user_version").fetchone()[0])  # type: ignore[index]
            if version > VERSION:
                raise StoreError(f"{self.path} was written by a newer Lore (version {version})")
            if version < VERSION:
                with self.conn:
                    self.conn.execute(SCHEMA)
                    self.conn.execute(f"PRAGMA user_version={VERSION}")
        except apsw.Error as exc:
            raise StoreError(f"cannot open the store journal {self.path}: {exc}") from exc

    def close(self) -> None:
        self.conn.close()

    def add(self, rows: list[tuple[str, str | None, float, dict[str, Any]]]) -> list[int]:
        """Appends (fid, project, received_at, request) rows in one transaction; their seqs."""
        try:
            with self.conn:
                return [int(self.conn.execute(
                    "INSERT INTO store_journal (fid, project, received_at, request) "
                    "VALUES (?, ?, ?, ?) RETURNING seq",
                    (fid, project, at, json.dumps({k: request.get(k) for k in FIELDS}))
                ).fetchone()[0]) for fid, project, at, request in rows]
        except apsw.Error as exc:
            raise StoreError(f"cannot write the store journal: {exc}") from exc

    def pending(self, limit: int = 1_000_000) -> list[JournalRow]:
        """The rows not yet placed, oldest first."""
        return [self._row(r) for r in self.conn.execute(
            "SELECT seq, fid, project, received_at, request FROM store_journal "
            "ORDER BY seq LIMIT ?", (limit,))]

    def get(self, fid: str) -> JournalRow | None:
        row = self.conn.execute("SELECT seq, fid, project, received_at, request FROM "
                                "store_journal WHERE fid = ?", (fid,)).fetchone()
        return None if row is None else self._row(row)

    def remove(self, fids: list[str]) -> None:
        """Placed (or refused for good): gone from the journal, in one transaction."""
        if not fids:
            return
        try:
            with self.conn:
                self.conn.executemany("DELETE FROM store_journal WHERE fid = ?",
                                      [(f,) for f in fids])
        except apsw.Error as exc:
            raise StoreError(f"cannot update the store journal: {exc}") from exc

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM store_journal").fetchone()[0])

    def oldest(self) -> float | None:
        """When the oldest waiting request was received (None: nothing waits)."""
        row = self.conn.execute("SELECT min(received_at) FROM store_journal").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def scrub(self) -> None:
        """No copy of a placed row's text left in the file or its WAL: the WAL folded in and
        truncated, the file rewritten (free pages of rows deleted before secure_delete was
        on go too). For `lore forget`; cheap, the journal holds only what waits."""
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.conn.execute("VACUUM")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except apsw.Error as exc:
            raise StoreError(f"cannot scrub the store journal {self.path}: {exc}") from exc

    @staticmethod
    def _row(row: Any) -> JournalRow:
        return int(row[0]), str(row[1]), row[2], float(row[3]), json.loads(row[4])


def backlog(db_path: Path | str) -> tuple[int, float | None]:
    """How many store requests wait in the journal beside `db_path`, and when the oldest came
    (for `lore status` and `lore service status`). No file: none wait, and none is made.
    StoreError: the file cannot be opened (corrupt, unreadable, from a newer Lore)."""
    path = journal_path(db_path)
    if not path.exists():
        return 0, None
    journal = StoreJournal(path)
    try:
        return journal.count(), journal.oldest()
    except apsw.Error as exc:
        raise StoreError(f"cannot read the store journal {path}: {exc}") from exc
    finally:
        journal.close()


def scrub(db_path: Path | str) -> None:
    """StoreJournal.scrub on the journal beside `db_path`, when there is one."""
    path = journal_path(db_path)
    if not path.exists():
        return
    journal = StoreJournal(path)
    try:
        journal.scrub()
    finally:
        journal.close()


def backlog_line(db_path: Path | str, now: float) -> str:
    """One line on the journal for a person: what waits, or why it cannot be read (never a
    traceback; store_memory then places each request directly, recall/store_journal.py)."""
    try:
        waiting, oldest = backlog(db_path)
    except StoreError as exc:
        return (f"unreadable ({exc}); store_memory answers after placement until the file is "
                "moved aside")
    if not waiting:
        return "no store waiting for placement"
    age = max(0.0, now - oldest) if oldest is not None else 0.0
    return f"{waiting} store(s) waiting for placement, the oldest for {age:.1f} s"
