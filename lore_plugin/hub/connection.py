"""A pool of connections to the hub, bound to one space and one machine, and the two
transaction shapes the store's methods use, as store/connection.py offers them for SQLite:
`write()` (nested calls join the outer transaction) and `read()` (one snapshot).

Outside a transaction each statement borrows a pooled connection in autocommit. A dropped
connection (server restart, network cut, pg_terminate_backend) rolls its transaction back
on the server; psycopg raises, the pool throws the connection away and opens another, and
the error reaches the caller as HubUnavailable. Methods whose effect is the same when run
twice (upserts, inserts of known ids) are retried here through `_atomic`; the others leave
the retry to their caller (ingestion keeps its watermark and tries again later)."""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from . import bootstrap
from .errors import HubUnavailable
from .space_names import access_denied

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRIES = 4  # attempts of an idempotent write across dropped connections
RETRY_PAUSE = 0.2  # seconds before the first retry; doubled each time
POOL_WAIT = 10.0  # seconds a caller waits for a pooled connection
# The embedding model every vector of Lore comes from (embedding/embedder.MODEL_NAME); a
# space records it with the first vector, and a client with another refuses to write.
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _configure(conn: psycopg.Connection, machine: str = "") -> None:
    # The machine label the database stamps on each fragment (hub/access_sql.py).
    conn.execute("SELECT set_config('lore.machine', %s, false)", (machine,))
    # HNSW with a filter (one space, one depth, live only) would return fewer than k rows:
    # pgvector 0.8's iterative scan keeps walking the graph until k rows pass the filter.
    conn.execute("SET hnsw.iterative_scan = relaxed_order")
    conn.execute("SET hnsw.ef_search = 200")


class HubConnection:
    """The base every concern of the hub store builds on."""

    # Every statement is a round trip: the memory engine writes a recall's reinforcement
    # after the answer instead of before it (recall/memory_base.after_answer).
    remote = True

    def __init__(self, url: str, space: str, *, machine: str | None = None,
                 model: str = DEFAULT_MODEL, create_space: bool = False,
                 pool_size: int = 4) -> None:
        self.url, self.space = url, space
        self.machine = machine or socket.gethostname()
        self.model = model
        self.readonly = False
        self._local = threading.local()
        self._pins, self._pins_lock = 0, threading.Lock()  # connections held by sessions
        with bootstrap.connect(url) as conn:
            if create_space:
                bootstrap.migrate(conn, url)
            else:
                bootstrap.check_schema(conn, url)
            self.space = bootstrap.ensure_space(conn, space, create_space, url)
        self.pool = ConnectionPool(
            url, min_size=1, max_size=pool_size, open=False, timeout=POOL_WAIT,
            kwargs={"autocommit": True, "connect_timeout": bootstrap.CONNECT_TIMEOUT},
            configure=functools.partial(_configure, machine=self.machine),
            check=ConnectionPool.check_connection, name=f"lore-hub-{space}")
        self.pool.open(wait=False)

    def close(self) -> None:
        self.pool.close()

    # -- transactions ---------------------------------------------------------------------
    def in_transaction(self) -> bool:
        return getattr(self._local, "conn", None) is not None

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """One transaction on one pooled connection; nested calls join it. A connection
        lost inside raises HubUnavailable and nothing of the transaction is kept."""
        if self.in_transaction():
            yield
            return
        try:
            with self.pool.connection() as conn, conn.transaction():
                self._local.conn = conn
                try:
                    yield
                finally:
                    self._local.conn = None
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise HubUnavailable(f"the hub at {bootstrap.display(self.url)} dropped the "
                                 f"connection; nothing of that write was kept: "
                                 f"{bootstrap._first_line(exc)}") from exc

    read = write  # a transaction is one snapshot enough for the reads that ask for one

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """This thread's statements outside a transaction share one pooled connection until
        the block ends (nested blocks join it). The pool checks a connection with a round
        trip each time it lends one: a recall's dozen reads each borrowing their own paid
        that dozen times (80 of 280 ms a query at 10K under load). A connection lost inside
        fails the statement that met it, as before; the pool replaces it afterwards."""
        if self.in_transaction() or getattr(self._local, "session", None) is not None:
            yield
            return
        # One connection always stays for statements that borrow: a session's thread may
        # wait for another thread (the query for its keyword search), and that thread must
        # find a connection, or both would wait for the pool's timeout.
        with self._pins_lock:
            pinned = self._pins < self.pool.max_size - 1
            self._pins += pinned
        if not pinned:
            yield
            return
        try:
            try:
                lent = self.pool.connection()
                conn = lent.__enter__()
            except (psycopg.OperationalError, PoolTimeout) as exc:
                raise HubUnavailable(f"the hub at {bootstrap.display(self.url)} is "
                                     f"unreachable: {bootstrap._first_line(exc)}") from exc
            self._local.session = conn
            try:
                yield
            finally:
                self._local.session = None
                lent.__exit__(None, None, None)
        finally:
            with self._pins_lock:
                self._pins -= 1

    def _atomic(self, work: Callable[[], T]) -> T:
        """Runs `work` in one write transaction, again after a dropped connection: only for
        work whose second run changes nothing the first one committed."""
        if self.in_transaction():
            return work()
        pause = RETRY_PAUSE
        for attempt in range(RETRIES):
            try:
                with self.write():
                    return work()
            except HubUnavailable:
                if attempt == RETRIES - 1:
                    raise
                log.info("hub connection lost; retrying (%d)", attempt + 1)
                time.sleep(pause)
                pause *= 2
        raise AssertionError("unreachable")

    # -- statements -----------------------------------------------------------------------
    @contextlib.contextmanager
    def _cursor(self) -> Iterator[psycopg.Cursor[Any]]:
        conn = getattr(self._local, "conn", None)
        joined = conn is not None  # inside write(): a lost connection is the transaction's
        conn = conn or getattr(self._local, "session", None)
        try:
            if conn is not None:
                with conn.cursor() as cur:
                    yield cur
                return
            with self.pool.connection() as conn, conn.cursor() as cur:
                yield cur
        except psycopg.errors.InsufficientPrivilege as exc:  # row-level security said no
            raise access_denied(exc, self.space) from None
        except (psycopg.OperationalError, PoolTimeout) as exc:
            if joined:
                raise  # write() says that nothing of the transaction was kept
            raise HubUnavailable(f"the hub at {bootstrap.display(self.url)} is unreachable: "
                                 f"{bootstrap._first_line(exc)}") from exc

    def _all(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        with self._cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def _one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        rows = self._all(sql, params)
        return rows[0][0] if rows else None

    def _run(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Executes one statement; returns the rows it changed."""
        with self._cursor() as cur:
            cur.execute(sql, params)
            return max(cur.rowcount, 0)

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        with self._cursor() as cur:
            cur.executemany(sql, rows)
