"""The Stop hook's one read: how far into a transcript ingestion has got (its watermark).

It runs after every turn, so it opens the file with apsw alone: no `Store`, whose twenty
modules (pathlib, contextlib, every mixin) cost the hook more than the read itself, and no
migrations. It answers only from a database already at this schema version; anything else
(an older or newer file, a busy or broken one) returns None and the caller asks `Store`,
which migrates, waits or explains exactly as before."""

from __future__ import annotations

import apsw

from .schema import SCHEMA_VERSION

# Readers of a WAL database are not blocked by writers; this covers only a checkpoint's or a
# recovery's brief lock. Past it, Store's own 10 s wait takes over.
BUSY_MS = 1_000


def watermark(db_path: str, transcript: str) -> int | None:
    """The byte offset ingestion has reached in `transcript` (0 when it has none), or None
    when this lean read cannot answer."""
    try:
        conn = apsw.Connection(db_path, flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return None
    try:
        conn.set_busy_timeout(BUSY_MS)
        # A migration changes the version in the same transaction as the tables, so a file
        # at this version has the watermarks table as this code knows it.
        version = conn.execute("PRAGMA user_version").fetchone()
        if version is None or version[0] != SCHEMA_VERSION:
            return None
        row = conn.execute("SELECT byte_offset FROM watermarks WHERE file_path = ?",
                           (transcript,)).fetchone()
        return int(row[0]) if row else 0
    except apsw.Error:
        return None
    finally:
        conn.close()
