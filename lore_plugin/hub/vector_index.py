"""A large load builds the HNSW index once after its rows instead of row by row.

pgvector inserts into an HNSW graph one row at a time: at 100K fragments that was most of a
push (37-67 rows/s), while building the index over the same rows is several times faster
(bench/README.md). The index is one for the whole `fragments` table, shared by every space,
so it may only be set aside when all of these hold:

- the load is large (BULK_MIN rows at least) and the table is small beside it (at most
  REBUILD_RATIO times the rows coming in), so rebuilding it costs less than the inserts;
- this role owns the table (DROP and CREATE INDEX need it; a team member's push goes row by
  row);
- no other loader holds the session advisory lock BULK_LOCK (two machines pushing at once:
  the second goes row by row; its rows are cheap while the index is away and the first
  one's build includes them).

Meanwhile readers stay correct: without the index PostgreSQL answers a vector search by an
exact scan (the same or better neighbours, slower), and the index is dropped and created
CONCURRENTLY, so neither step blocks a reader or a writer. A push killed in between leaves
no index, or an INVALID one from an interrupted build; the lock dies with its session, and
`ensure()` (run by every push before it starts, and by `lore hub init`) builds it again."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import psycopg

from . import bootstrap

log = logging.getLogger(__name__)
NAME = "fragments_embedding"  # as schema.py's migration 1 creates it
CREATE = (f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NAME} ON fragments "
          "USING hnsw (embedding vector_cosine_ops)")
BULK_LOCK = 0x4C4F5245_0005  # pg_advisory_lock key: "LORE", the vector index set aside
BULK_MIN = 10_000  # rows below which the row-by-row path is cheaper than a rebuild
REBUILD_RATIO = 2.0  # rows already in the table, at most, per row coming in
BUILD_MEMORY = "512MB"  # maintenance_work_mem for the build: the graph of 100K fits in it


def _state(conn: psycopg.Connection) -> str:
    """'valid', 'invalid' (an interrupted concurrent build) or 'missing'."""
    row = conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)",
                       (NAME,)).fetchone()
    if row is None:
        return "missing"
    return "valid" if row[0] else "invalid"


def _owner(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class "
                       "WHERE oid = 'fragments'::regclass").fetchone()
    return bool(row and row[0])


def _table_rows(conn: psycopg.Connection) -> float:
    """Rows of the whole table, all spaces (the planner's estimate: row-level security
    would hide other spaces from a count, and the rebuild covers them too)."""
    row = conn.execute("SELECT greatest(reltuples, 0) FROM pg_class "
                       "WHERE oid = 'fragments'::regclass").fetchone()
    return float(row[0]) if row else 0.0


def _try_lock(conn: psycopg.Connection) -> bool:
    """The loader's lock, held by this session until released or the session ends."""
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (BULK_LOCK,)).fetchone()
    return bool(row and row[0])


def _build(conn: psycopg.Connection) -> None:
    if _state(conn) == "invalid":  # a build interrupted: it must go before IF NOT EXISTS
        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
    conn.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
    conn.execute(CREATE)


def ensure(url: str) -> bool:
    """Builds the vector index again if a load left it missing or invalid, unless a loader
    holds it aside right now, or this role may not; returns whether it built one."""
    with bootstrap.connect(url) as conn:
        if _state(conn) == "valid" or not _owner(conn):
            return False
        if not _try_lock(conn):
            return False  # a load is under way: its end builds the index
        try:
            if _state(conn) == "valid":
                return False
            log.warning("the hub's vector index is missing (a bulk push was interrupted); "
                        "building it again")
            _build(conn)
            return True
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (BULK_LOCK,))


@contextlib.contextmanager
def set_aside(url: str, incoming: int) -> Iterator[bool]:
    """Around a load of `incoming` rows: yields True when the index was set aside for it
    (built again on leaving, whatever happened), False when the rows go in row by row."""
    if incoming < BULK_MIN:
        yield False
        return
    with bootstrap.connect(url) as conn:
        if (_table_rows(conn) > REBUILD_RATIO * incoming or not _owner(conn)
                or not _try_lock(conn)):
            yield False
            return
        try:
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
            yield True
        finally:
            _build(conn)
            conn.execute("SELECT pg_advisory_unlock(%s)", (BULK_LOCK,))
