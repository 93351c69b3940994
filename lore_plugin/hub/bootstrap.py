"""Opening a hub: reach the server (a wrong URL or password is one clear line), make sure
pgvector is there, create or migrate the schema, and find or create a space. Each step
runs on one plain connection before any pool exists, so a refusal leaves nothing open."""

from __future__ import annotations

import time

import psycopg
from psycopg import conninfo

from .errors import HubSchemaTooNew, HubUnreachable, NoPgvector, UnknownSpace
from .schema import MIGRATE_LOCK, MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE
from .space_names import check_visible, resolve_space

CONNECT_TIMEOUT = 5  # seconds: a hub that is down must not hold a session


def display(url: str) -> str:
    """The URL as a message may show it: user, host, port and database, never a password."""
    try:
        parts = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(an unreadable hub URL)"
    host = parts.get("host") or "localhost"
    where = f"{host}:{parts['port']}" if parts.get("port") else host
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"postgresql://{user}{where}/{parts.get('dbname', '')}"


def read_only(url: str) -> str:
    """The URL with every transaction of its sessions read-only, by the server's own rule
    (default_transaction_read_only): a preview through it cannot write, whatever it calls.
    Options the URL already gives are kept."""
    try:
        given = conninfo.conninfo_to_dict(url).get("options") or ""
    except psycopg.ProgrammingError as exc:
        raise HubUnreachable(f"the hub URL is not valid: {_first_line(exc)}") from None
    return conninfo.make_conninfo(
        url, options=f"{given} -c default_transaction_read_only=on".strip())


def connect(url: str, autocommit: bool = True) -> psycopg.Connection:
    """One connection, or HubUnreachable naming what failed in one line."""
    try:
        return psycopg.connect(url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.ProgrammingError as exc:  # not a URL psycopg can read
        raise HubUnreachable(f"the hub URL is not valid: {_first_line(exc)}") from None
    except psycopg.OperationalError as exc:
        raise HubUnreachable(f"cannot connect to the hub at {display(url)}: "
                             f"{_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def ensure_pgvector(conn: psycopg.Connection, url: str) -> None:
    """Creates the extension when it is installed but not enabled (allowed for a database's
    owner since PostgreSQL 13, pgvector being trusted); refuses with the fix otherwise."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    available = conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if available:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            return
        except psycopg.Error as exc:
            raise NoPgvector(
                f"the hub at {display(url)} has pgvector installed but not enabled, and this "
                f"role may not enable it ({_first_line(exc)}): ask its owner to run "
                "CREATE EXTENSION vector;") from None
    raise NoPgvector(
        f"the hub at {display(url)} has no pgvector extension: install pgvector on the server "
        "(https://github.com/pgvector/pgvector#installation, or a managed PostgreSQL that "
        "offers it), then run CREATE EXTENSION vector;")


def schema_version(conn: psycopg.Connection) -> int:
    if conn.execute("SELECT to_regclass(%s)", (VERSION_TABLE,)).fetchone()[0] is None:  # type: ignore[index]
        return 0
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
    return int(row[0] or 0) if row else 0


def refuse_newer(version: int, url: str) -> None:
    if version > SCHEMA_VERSION:
        raise HubSchemaTooNew(
            f"the hub at {display(url)} has schema version {version}, newer than this Lore "
            f"({SCHEMA_VERSION}): upgrade Lore on this machine; the hub was left untouched")


def migrate(conn: psycopg.Connection, url: str) -> int:
    """Creates or migrates the schema; returns how many migrations ran (0 when current).
    Each migration commits with its version row; the advisory lock makes a second
    machine's init wait, then find nothing to do."""
    ensure_pgvector(conn, url)
    if schema_version(conn) == SCHEMA_VERSION:
        return 0  # a member may not create tables, not even IF NOT EXISTS: ask first
    refuse_newer(schema_version(conn), url)
    ran = 0
    while True:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
            conn.execute(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version integer PRIMARY "
                         "KEY, applied_at double precision NOT NULL)")
            version = schema_version(conn)
            refuse_newer(version, url)
            if version == SCHEMA_VERSION:
                return ran
            conn.execute(MIGRATIONS[version])  # DDL: no parameters in it
            conn.execute(f"INSERT INTO {VERSION_TABLE} (version, applied_at) VALUES (%s, %s)",
                         (version + 1, time.time()))
            ran += 1


def check_schema(conn: psycopg.Connection, url: str) -> None:
    """For a client that only uses the hub: the schema must be exactly this Lore's."""
    version = schema_version(conn)
    refuse_newer(version, url)
    if version < SCHEMA_VERSION:
        raise HubUnreachable(
            f"the hub at {display(url)} has schema version {version}, older than this Lore's "
            f"({SCHEMA_VERSION}): run `lore hub init` to migrate it")


def ensure_space(conn: psycopg.Connection, space: str, create: bool, url: str) -> str:
    """Finds or creates the space; returns its name in the hub (`personal` is each role's
    own, see access.resolve_space)."""
    space = resolve_space(conn, space)
    if create:
        try:
            conn.execute("INSERT INTO spaces (name, created_at) VALUES (%s, %s) "
                         "ON CONFLICT (name) DO NOTHING", (space, time.time()))
        except psycopg.errors.CheckViolation:
            raise UnknownSpace(
                f"'{space[:70]}' cannot name a space: use lower-case letters, digits, '-', "
                "'_' or '.', at most 63") from None
        check_visible(conn, space, display(url))
    elif conn.execute("SELECT 1 FROM spaces WHERE name = %s", (space,)).fetchone() is None:
        known = [r[0] for r in conn.execute("SELECT name FROM spaces ORDER BY name LIMIT 20")]
        raise UnknownSpace(
            f"the hub at {display(url)} has no space '{space[:70]}' (it has: "
            f"{', '.join(known) or 'none'}); create it with `lore hub init` or pick another")
    return space


def spaces(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM spaces ORDER BY name")]
