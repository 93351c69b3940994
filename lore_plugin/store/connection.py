"""One connection to the memory database: opening (read-only or writable), migrations, and
the two transaction shapes every other part of the store uses.

Readers open read-only; writers keep transactions short (`BEGIN IMMEDIATE`, so two writers
queue on the busy timeout instead of deadlocking)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import apsw

from ..core.errors import LoreError, SchemaTooNew
from .schema import MIGRATIONS, SCHEMA_VERSION

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any

BUSY_TIMEOUT_MS = 10_000
IN_CHUNK = 500  # values per IN (...) list; SQLite allows a few thousand parameters
BusyError = apsw.BusyError  # re-exported so callers can retry without importing apsw
DatabaseError = apsw.Error  # any failure of SQLite itself (busy, full disk, I/O, corruption)


class StoreError(LoreError):
    pass


def new_id() -> str:
    return os.urandom(16).hex()  # as random as uuid4, without importing uuid


class Connection:
    """The base every concern of the store builds on: `conn`, `write()`, `read()` and two
    query helpers. Opening runs the migrations a writable file needs."""

    def __init__(self, path: Path | str, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if readonly:
            if not self.path.exists():
                Connection(self.path).close()  # create and migrate once, then reopen read-only
            flags = apsw.SQLITE_OPEN_READONLY
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        try:
            # Typed Any: apsw types every column as a union; our own SQL fixes the shapes.
            self.conn: Any = apsw.Connection(str(self.path), flags=flags)
            self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            if not readonly:
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            version = self.user_version()
        except apsw.Error as exc:
            raise StoreError(f"cannot open the memory database {self.path}: {exc}") from exc
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"{self.path} has schema version {version}, newer than this Lore "
                f"({SCHEMA_VERSION}). Upgrade Lore; the database was left untouched."
            )
        if version < SCHEMA_VERSION:
            if readonly:
                # A new or older file (maybe being created by another process right now):
                # migrate through a writable connection, which waits on the other's lock.
                Connection(self.path).close()
            else:
                self.migrate()

    def close(self) -> None:
        self.conn.close()

    def user_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def migrate(self, target: int = SCHEMA_VERSION) -> None:
        while (version := self.user_version()) < target:
            with self.write():
                # Re-check inside the lock: another process may have migrated meanwhile.
                if self.user_version() != version:
                    continue
                self.conn.execute(MIGRATIONS[version])
                self.conn.execute(f"PRAGMA user_version={version + 1}")

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """One short write transaction; nested calls join the outer one."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        """A part of the open write transaction that can fail alone: on an error its own
        changes are undone and the rest of the transaction goes on (group commit: one
        request's bad arguments must not undo the others in its batch)."""
        self.conn.execute("SAVEPOINT part")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK TO part")
            self.conn.execute("RELEASE part")
            raise
        else:
            self.conn.execute("RELEASE part")

    @contextlib.contextmanager
    def read(self) -> Iterator[None]:
        """A consistent snapshot across several SELECTs."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    def _rows_in(self, sql: str, values: Sequence[Any], first: Sequence[Any] = ()
                 ) -> Iterator[Any]:
        """Runs `sql` once per IN_CHUNK values, its `%s` replaced by that many placeholders:
        SQLite caps the parameters of one statement. `first` binds the placeholders before
        the list."""
        for start in range(0, len(values), IN_CHUNK):
            chunk = list(values[start:start + IN_CHUNK])
            yield from self.conn.execute(sql.replace("%s", ",".join("?" * len(chunk))),
                                         [*first, *chunk])

    def _one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]
