"""The storage layer: the only module that imports apsw. Every SQL statement lives here.

One `Store` wraps one connection. Readers open read-only; writers keep transactions short
(`BEGIN IMMEDIATE`, so two writers queue on the busy timeout instead of deadlocking)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import apsw

from .errors import AmbiguousId, InvalidInput, LoreError, NotFound, SchemaTooNew
from .schema import MIGRATIONS, SCHEMA_VERSION

# The value types (dataclasses) are imported where rows become objects, not here: the Stop
# hook opens a Store after every turn only to read one watermark, and importing dataclasses
# would cost it more than its whole budget allows.
TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any

    from .relevance import MemoryState
    from .types import Edge, Fragment, NewFragment

BUSY_TIMEOUT_MS = 10_000
IN_CHUNK = 500  # values per IN (...) list; SQLite allows a few thousand parameters
FRAGMENT_COLUMNS = (
    "id, content, summary, depth, created_at, last_accessed, access_count, importance, "
    "decay_rate, last_reinforced, relevance_score, source_session, superseded_by, project, metadata"
)
_FRAGMENT_NUMBERS = FRAGMENT_COLUMNS.replace("content, summary", "'', ''").replace(
    "metadata", "NULL")
# The same columns of the fragments alias f, for keyword_search's JSON rows.
_FRAGMENT_JSON = ", ".join(c if c in ("''", "NULL") else f"f.{c}"
                           for c in _FRAGMENT_NUMBERS.split(", "))
_ID_PREFIX = re.compile(r"^[0-9a-fA-F-]{8,64}$")
BusyError = apsw.BusyError  # re-exported so callers can retry without importing apsw


class StoreError(LoreError):
    pass


def _row_to_fragment(row: Sequence[Any], parent_id: str | None = None) -> Fragment:
    from .types import Fragment
    meta = json.loads(row[14]) if row[14] and row[14] != "{}" else {}
    return Fragment(
        id=row[0], content=row[1], summary=row[2], depth=row[3], created_at=row[4],
        last_accessed=row[5], access_count=row[6], importance=row[7], decay_rate=row[8],
        last_reinforced=row[9], relevance_score=row[10], source_session=row[11],
        superseded_by=row[12], project=row[13], metadata=meta, parent_id=parent_id,
    )


def _decay_rate_for(importance: float) -> float:
    from .relevance import decay_rate_for

    return decay_rate_for(importance)


def new_id() -> str:
    return os.urandom(16).hex()  # as random as uuid4, without importing uuid


class Store:
    def __init__(self, path: Path | str, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if readonly:
            if not self.path.exists():
                Store(self.path).close()  # create and migrate once, then reopen read-only
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
                Store(self.path).close()
            else:
                self.migrate()

    # -- plumbing -----------------------------------------------------------------------
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

    # -- fragments ----------------------------------------------------------------------
    def insert(self, new: NewFragment, now: float, embedding: bytes | None = None,
               parent_id: str | None = None) -> str:
        fid = new.id or new_id()
        created = new.created_at if new.created_at is not None else now
        with self.write():
            self.conn.execute(
                "INSERT INTO fragments (id, content, summary, depth, embedding, created_at, "
                "last_accessed, access_count, source_session, metadata, importance, "
                "relevance_score, decay_rate, last_reinforced, project) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)",
                (fid, new.content, new.summary, new.depth, embedding, created, created,
                 new.source_session, json.dumps(new.metadata), new.importance,
                 new.importance * 1.3, _decay_rate_for(new.importance), created, new.project),
            )
            if parent_id is not None:
                self.link(parent_id, fid, "hierarchical", 1.0, now)
        return fid

    def get(self, fid: str) -> Fragment:
        row = self.conn.execute(
            f"SELECT {FRAGMENT_COLUMNS} FROM fragments WHERE id = ?", (fid,)).fetchone()
        if row is None:
            raise NotFound(f"no fragment with id {fid}; use query_memory or list_topics to find ids")
        return _row_to_fragment(row, self.parent_id(fid))

    def get_many(self, ids: Sequence[str], with_text: bool = True,
                 with_parent: bool = True) -> dict[str, Fragment]:
        """The fragments with these ids. `with_text=False` leaves content, summary and
        metadata empty, and `with_parent=False` leaves parent_id None: ranking a query's few
        hundred candidates needs only the numbers, and skipping the text and the parent
        lookup more than halves the cost (memory.py fetches the text of the winners and the
        parents it climbs through)."""
        columns = FRAGMENT_COLUMNS if with_text else _FRAGMENT_NUMBERS
        if not with_parent:
            return {row[0]: _row_to_fragment(row) for row in self._rows_in(
                f"SELECT {columns} FROM fragments WHERE id IN (%s)", ids)}
        rows = self._rows_in(
            f"SELECT {columns}, (SELECT source FROM edges WHERE target = f.id AND "
            "kind = 'hierarchical' LIMIT 1) FROM fragments f WHERE id IN (%s)", ids)
        return {row[0]: _row_to_fragment(row, row[15]) for row in rows}

    def resolve_id(self, given: str) -> str:
        """Accepts a full id or a unique prefix of 8+ characters."""
        given = given.strip().lower()
        if not _ID_PREFIX.match(given):
            raise InvalidInput(
                f"'{given[:40]}' is not a fragment id: ids are hex, give at least 8 characters")
        if self._one("SELECT 1 FROM fragments WHERE id = ?", (given,)):
            return given
        rows = self.conn.execute(
            "SELECT id FROM fragments WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
            (given, given + "\U0010ffff")).fetchall()
        if not rows:
            raise NotFound(f"no fragment id starts with {given}; use query_memory to find ids")
        if len(rows) > 1:
            shown = ", ".join(r[0][:12] for r in rows[:5])
            raise AmbiguousId(f"{given} matches several fragments ({shown}); give more characters")
        return str(rows[0][0])

    def parent_id(self, fid: str) -> str | None:
        return self._one(
            "SELECT source FROM edges WHERE target = ? AND kind = 'hierarchical' LIMIT 1", (fid,))

    def parent_ids(self, ids: Sequence[str]) -> dict[str, str]:
        """child -> parent for those of `ids` that have one."""
        return dict(self._rows_in(
            "SELECT target, source FROM edges WHERE kind = 'hierarchical' AND target IN (%s)",
            ids))

    def ancestors(self, fid: str) -> list[str]:
        """Parent first, topic last."""
        rows = self.conn.execute(
            "WITH RECURSIVE up(id, n) AS (SELECT ?, 0 UNION ALL "
            "SELECT e.source, up.n + 1 FROM edges e JOIN up ON e.target = up.id "
            "WHERE e.kind = 'hierarchical' AND up.n < 32) SELECT id FROM up WHERE n > 0 ORDER BY n",
            (fid,)).fetchall()
        return [r[0] for r in rows]

    def child_ids(self, fid: str, include_superseded: bool = False) -> list[str]:
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        rows = self.conn.execute(
            "SELECT e.target FROM edges e JOIN fragments f ON f.id = e.target "
            f"WHERE e.source = ? AND e.kind = 'hierarchical' {hide} "
            "ORDER BY f.created_at, f.rowid", (fid,)).fetchall()
        return [r[0] for r in rows]

    def descendant_ids(self, fid: str, max_levels: int = 16,
                       include_superseded: bool = False) -> list[tuple[str, int]]:
        """(id, level below fid) breadth-first, fid itself excluded."""
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        rows = self.conn.execute(
            "WITH RECURSIVE down(id, n) AS (SELECT ?, 0 UNION ALL "
            "SELECT e.target, down.n + 1 FROM edges e JOIN down ON e.source = down.id "
            "JOIN fragments f ON f.id = e.target "
            f"WHERE e.kind = 'hierarchical' AND down.n < ? {hide}) "
            "SELECT id, n FROM down WHERE n > 0", (fid, max_levels)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def descendants_at_depth(self, roots: Sequence[str], depth: int,
                             include_superseded: bool = False) -> list[tuple[str, str]]:
        """(root, descendant) for the descendants of each root that sit at `depth`, in one
        walk per IN_CHUNK roots (a walk per root cost 0.2 ms each in a query)."""
        hide = "" if include_superseded else "AND f.superseded_by IS NULL"
        rows = self._rows_in(
            "WITH RECURSIVE down(root, id, n, levels) AS (SELECT id, id, 0, ? - depth "
            "FROM fragments WHERE id IN (%s) UNION ALL SELECT down.root, e.target, down.n + 1, "
            "down.levels FROM edges e JOIN down ON e.source = down.id "
            "JOIN fragments f ON f.id = e.target "
            f"WHERE e.kind = 'hierarchical' AND down.n < down.levels {hide}) "
            "SELECT root, id FROM down WHERE n > 0 AND n = levels", roots, (depth,))
        return [(r[0], r[1]) for r in rows]

    def topic_ids(self, include_superseded: bool = False) -> list[str]:
        hide = "" if include_superseded else "AND superseded_by IS NULL"
        return [r[0] for r in self.conn.execute(
            f"SELECT id FROM fragments WHERE depth = 0 {hide} ORDER BY relevance_score DESC")]

    def descendant_counts(self, ids: Sequence[str]) -> dict[str, int]:
        """Live descendants under each given fragment, in one walk per IN_CHUNK roots."""
        rows = self._rows_in(
            "WITH RECURSIVE down(root, id, n) AS (SELECT id, id, 0 FROM fragments "
            "WHERE id IN (%s) UNION ALL SELECT down.root, e.target, down.n + 1 FROM edges e "
            "JOIN down ON e.source = down.id JOIN fragments f ON f.id = e.target "
            "WHERE e.kind = 'hierarchical' AND f.superseded_by IS NULL AND down.n < 16) "
            "SELECT root, count(*) - 1 FROM down GROUP BY root", ids)
        return {r[0]: r[1] for r in rows}

    def topic_totals(self, project: str | None) -> tuple[int, int]:
        """(live topics, live topics from `project`)."""
        row = self.conn.execute(
            "SELECT count(*), coalesce(sum(project IS ?), 0) FROM fragments "
            "WHERE depth = 0 AND superseded_by IS NULL", (project,)).fetchone()
        return int(row[0]), int(row[1]) if project else 0

    def topic_names(self, limit: int = 200) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT summary FROM fragments WHERE depth = 0 AND superseded_by IS NULL "
            "ORDER BY relevance_score DESC LIMIT ?", (limit,))]

    def find_by_summary(self, summary: str, depth: int | None = None,
                        parent_id: str | None = None) -> str | None:
        sql = ("SELECT f.id FROM fragments f WHERE lower(f.summary) = lower(?) "
               "AND f.superseded_by IS NULL")
        params: list[Any] = [summary.strip()]
        if depth is not None:
            sql += " AND f.depth = ?"
            params.append(depth)
        if parent_id is not None:
            sql += (" AND EXISTS (SELECT 1 FROM edges e WHERE e.target = f.id AND "
                    "e.source = ? AND e.kind = 'hierarchical')")
            params.append(parent_id)
        return self._one(sql + " LIMIT 1", params)

    def count_fragments(self, include_superseded: bool = True) -> int:
        hide = "" if include_superseded else " WHERE superseded_by IS NULL"
        return int(self._one(f"SELECT count(*) FROM fragments{hide}"))

    def counts(self) -> dict[str, int]:
        row = self.conn.execute(
            "SELECT count(*), sum(depth = 0), sum(superseded_by IS NOT NULL), "
            "sum(embedding IS NULL), (SELECT count(*) FROM edges) FROM fragments").fetchone()
        keys = ("fragments", "topics", "superseded", "without_embedding", "edges")
        return {k: int(v or 0) for k, v in zip(keys, row)}

    # -- embeddings ---------------------------------------------------------------------
    def embeddings_between(self, after_rowid: int, upto_rowid: int
                           ) -> Iterator[tuple[int, str, int, bytes]]:
        """Live vectors with after < rowid <= upto, streamed, so a 100K load never holds every
        blob in a Python list at once. The upper bound keeps concurrent appends for next time."""
        return self.conn.execute(  # type: ignore[return-value]
            "SELECT rowid, id, depth, embedding FROM fragments WHERE rowid > ? AND rowid <= ? "
            "AND embedding IS NOT NULL AND superseded_by IS NULL ORDER BY rowid",
            (after_rowid, upto_rowid))

    def embedding_sample(self, size: int) -> list[bytes]:
        """About `size` live vectors spread evenly over the table (by rowid)."""
        count = int(self._one("SELECT count(*) FROM fragments") or 0)
        step = max(1, count // max(size, 1))
        return [r[0] for r in self.conn.execute(
            "SELECT embedding FROM fragments WHERE rowid % ? = 0 AND embedding IS NOT NULL "
            "AND superseded_by IS NULL LIMIT ?", (step, size))]

    def vectors_at(self, rowids: Sequence[int]) -> dict[int, tuple[str, int, bytes]]:
        """rowid → (id, depth, vector) of those rows that are live and have a vector."""
        return {r[0]: (r[1], r[2], r[3]) for r in self._rows_in(
            "SELECT rowid, id, depth, embedding FROM fragments WHERE rowid IN (%s) "
            "AND embedding IS NOT NULL AND superseded_by IS NULL", rowids)}

    def live_embedded_count(self, after_rowid: int, upto_rowid: int) -> int:
        return int(self._one("SELECT count(*) FROM fragments WHERE rowid > ? AND rowid <= ? AND "
                             "embedding IS NOT NULL AND superseded_by IS NULL",
                             (after_rowid, upto_rowid)))

    def missing_embeddings(self, limit: int = 256) -> list[tuple[str, str]]:
        """(id, text to embed) for fragments stored while no model was available."""
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT id, summary || '\n' || content FROM fragments INDEXED BY idx_fragments_unembedded "
            "WHERE embedding IS NULL LIMIT ?", (limit,))]

    def set_embeddings(self, pairs: Sequence[tuple[str, bytes]]) -> None:
        with self.write():
            self.conn.executemany(
                "UPDATE fragments SET embedding = ? WHERE id = ?", [(b, i) for i, b in pairs])
            self.bump_vector_epoch()

    def bump_vector_epoch(self) -> None:
        """In-memory vector indexes reload fully when this changes; appends need no bump."""
        self.conn.execute(
            "INSERT INTO meta (key, value) VALUES ('vector_epoch', '1') ON CONFLICT(key) "
            "DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)")

    def vector_epoch(self) -> tuple[str, int]:
        epoch = self._one("SELECT value FROM meta WHERE key = 'vector_epoch'") or "0"
        return epoch, int(self._one("SELECT max(rowid) FROM fragments") or 0)

    def embedding_of(self, fid: str) -> bytes | None:
        return self._one("SELECT embedding FROM fragments WHERE id = ?", (fid,))

    # -- keyword search -----------------------------------------------------------------
    def keyword_search(self, match: str, limit: int) -> list[tuple[Fragment, float]]:
        """(fragment without text or parent, bm25) best first, for an FTS5 MATCH expression
        built by the caller.

        It answers in one row of JSON. apsw gives up the GIL for every row it steps, and a
        thread that wants it back waits out the switch interval while another runs Python:
        beside a busy Python thread, a hundred rows stepped one by one took 280-370 ms, and
        the same rows as one JSON row 25 ms."""
        try:
            # Rank inside the index first: joining every match before sorting is 3x slower
            # when a common term matches thousands of rows.
            found = self._one(
                f"SELECT json_group_array(json_array({_FRAGMENT_JSON}, x.r)) FROM "
                "(SELECT rowid, bm25(fragments_fts, 2.0, 1.0) AS r FROM fragments_fts "
                "WHERE fragments_fts MATCH ? ORDER BY r LIMIT ?) AS x "
                "JOIN fragments f ON f.rowid = x.rowid", (match, limit))
        except apsw.SQLError:
            return []  # an expression FTS5 cannot parse finds nothing rather than failing
        ranked = sorted(json.loads(found or "[]"), key=lambda row: row[-1])  # bm25 is last
        return [(_row_to_fragment(row), row[-1]) for row in ranked]

    # -- memory state -------------------------------------------------------------------
    def save_memory_states(self, states: dict[str, tuple[MemoryState, float]]) -> None:
        """id -> (new state, new relevance score)."""
        with self.write():
            self.conn.executemany(
                "UPDATE fragments SET access_count = ?, decay_rate = ?, last_accessed = ?, "
                "last_reinforced = ?, relevance_score = ? WHERE id = ?",
                [(s.access_count, s.decay_rate, s.last_accessed, s.last_reinforced, r, i)
                 for i, (s, r) in states.items()])

    def update_text(self, fid: str, summary: str | None = None, content: str | None = None,
                    embedding: bytes | None = None) -> None:
        with self.write():
            if summary is not None:
                self.conn.execute("UPDATE fragments SET summary = ? WHERE id = ?", (summary, fid))
            if content is not None:
                self.conn.execute("UPDATE fragments SET content = ? WHERE id = ?", (content, fid))
            if embedding is not None:
                self.conn.execute("UPDATE fragments SET embedding = ? WHERE id = ?", (embedding, fid))
                self.bump_vector_epoch()

    def set_metadata(self, fid: str, metadata: dict[str, Any]) -> None:
        with self.write():
            self.conn.execute("UPDATE fragments SET metadata = ? WHERE id = ?",
                              (json.dumps(metadata), fid))

    # -- edges --------------------------------------------------------------------------
    def link(self, source: str, target: str, kind: str, weight: float, now: float) -> None:
        """Idempotent: an existing edge of the same kind keeps the larger weight."""
        if source == target:
            raise InvalidInput("a fragment cannot be linked to itself")
        with self.write():
            if kind == "hierarchical":
                # One parent only: re-linking a child moves it.
                self.conn.execute(
                    "DELETE FROM edges WHERE target = ? AND kind = 'hierarchical'", (target,))
            self.conn.execute(
                "INSERT INTO edges (id, source, target, kind, weight, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(source, target, kind) "
                "DO UPDATE SET weight = max(weight, excluded.weight)",
                (new_id(), source, target, kind, weight, now))

    def edges_of(self, fid: str, kinds: Sequence[str] = ("associative", "temporal", "supersedes"),
                 ) -> list[Edge]:
        from .types import Edge
        marks = ",".join("?" * len(kinds))
        rows = self.conn.execute(
            f"SELECT id, source, target, kind, weight, created_at FROM edges "
            f"WHERE (source = ? OR target = ?) AND kind IN ({marks}) ORDER BY weight DESC",
            (fid, fid, *kinds)).fetchall()
        return [Edge(*r) for r in rows]

    def edges_touching(self, fids: Sequence[str], kinds: Sequence[str]) -> list[Edge]:
        """Edges of these kinds with either end among a few fragments (a query's hundred at
        most), in one statement."""
        from .types import Edge
        if not fids:
            return []
        marks, kind_marks = ",".join("?" * len(fids)), ",".join("?" * len(kinds))
        return [Edge(*r) for r in self.conn.execute(
            f"SELECT id, source, target, kind, weight, created_at FROM edges "
            f"WHERE kind IN ({kind_marks}) AND (source IN ({marks}) OR target IN ({marks}))",
            (*kinds, *fids, *fids))]

    def edges_by_kind(self, kind: str) -> list[Edge]:
        from .types import Edge
        return [Edge(*r) for r in self.conn.execute(
            "SELECT id, source, target, kind, weight, created_at FROM edges WHERE kind = ?",
            (kind,))]

    def decay_edges(self, kind: str, factor: float, prune_below: float) -> tuple[int, int]:
        with self.write():
            self.conn.execute("UPDATE edges SET weight = weight * ? WHERE kind = ?", (factor, kind))
            decayed = self.conn.changes()
            self.conn.execute("DELETE FROM edges WHERE kind = ? AND weight < ?", (kind, prune_below))
            pruned = self.conn.changes()
        return decayed, pruned

    # -- supersession, deletion ---------------------------------------------------------
    def supersede(self, old: str, new: str, now: float) -> None:
        if old == new:
            raise InvalidInput("a fragment cannot supersede itself")
        with self.write():
            self.conn.execute("UPDATE fragments SET superseded_by = ? WHERE id = ?", (new, old))
            self.link(new, old, "supersedes", 1.0, now)
            self.bump_vector_epoch()

    def reparent_children(self, fid: str, new_parent: str | None, now: float) -> int:
        children = self.child_ids(fid, include_superseded=True)
        with self.write():
            for child in children:
                if new_parent is None:
                    self.conn.execute("DELETE FROM edges WHERE target = ? AND kind = 'hierarchical'",
                                      (child,))
                else:
                    self.link(new_parent, child, "hierarchical", 1.0, now)
        return len(children)

    def delete(self, fid: str, now: float) -> None:
        """Deletes one fragment; its children move to its parent first. The FTS row goes with
        it (trigger), edges cascade, and supersession pointers to it are cleared."""
        with self.write():
            parent = self.parent_id(fid)
            self.reparent_children(fid, parent, now)
            self.conn.execute("UPDATE fragments SET superseded_by = NULL WHERE superseded_by = ?",
                              (fid,))
            self.conn.execute("DELETE FROM fragments WHERE id = ?", (fid,))
            self.bump_vector_epoch()

    # -- watermarks, failures, meta -----------------------------------------------------
    def watermark(self, file_path: str) -> int:
        return int(self._one("SELECT byte_offset FROM watermarks WHERE file_path = ?",
                             (file_path,)) or 0)

    def set_watermark(self, file_path: str, offset: int, now: float) -> None:
        with self.write():
            self.conn.execute(
                "INSERT INTO watermarks (file_path, byte_offset, last_processed) VALUES (?, ?, ?) "
                "ON CONFLICT(file_path) DO UPDATE SET byte_offset = excluded.byte_offset, "
                "last_processed = excluded.last_processed", (file_path, offset, now))

    def watermarks(self) -> dict[str, int]:
        return {r[0]: r[1] for r in self.conn.execute(
            "SELECT file_path, byte_offset FROM watermarks")}

    def record_failure(self, file_path: str, start: int, end: int, error: str, now: float,
                       backoff: float, park_after: int) -> int:
        """Returns the attempt count; the batch is parked once it reaches park_after."""
        with self.write():
            self.conn.execute(
                "INSERT INTO ingest_failures (file_path, start_offset, end_offset, last_error, "
                "first_failed, next_retry) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(file_path, start_offset) DO UPDATE SET attempts = attempts + 1, "
                "end_offset = excluded.end_offset, last_error = excluded.last_error",
                (file_path, start, end, error[:2000], now, now + backoff))
            attempts = int(self._one(
                "SELECT attempts FROM ingest_failures WHERE file_path = ? AND start_offset = ?",
                (file_path, start)))
            delay = backoff * (2 ** (attempts - 1))
            self.conn.execute(
                "UPDATE ingest_failures SET next_retry = ?, parked = ? "
                "WHERE file_path = ? AND start_offset = ?",
                (now + delay, int(attempts >= park_after), file_path, start))
        return attempts

    def failure(self, file_path: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT start_offset, attempts, next_retry, parked, last_error FROM ingest_failures "
            "WHERE file_path = ? ORDER BY start_offset LIMIT 1", (file_path,)).fetchone()
        if row is None:
            return None
        return dict(zip(("start_offset", "attempts", "next_retry", "parked", "last_error"), row))

    def failures(self, parked_only: bool = False) -> list[dict[str, Any]]:
        where = "WHERE parked = 1" if parked_only else ""
        cols = ("file_path", "start_offset", "end_offset", "attempts", "last_error",
                "next_retry", "parked")
        return [dict(zip(cols, r)) for r in self.conn.execute(
            f"SELECT {', '.join(cols)} FROM ingest_failures {where} ORDER BY first_failed")]

    def clear_failure(self, file_path: str) -> None:
        with self.write():
            self.conn.execute("DELETE FROM ingest_failures WHERE file_path = ?", (file_path,))

    def unpark_all(self, now: float) -> int:
        with self.write():
            self.conn.execute(
                "UPDATE ingest_failures SET parked = 0, attempts = 0, next_retry = ?", (now,))
            return self.conn.changes()

    def get_meta(self, key: str) -> str | None:
        return self._one("SELECT value FROM meta WHERE key = ?", (key,))

    def set_meta(self, key: str, value: str) -> None:
        with self.write():
            self.conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))

    def record_consolidation(self, started: float, finished: float, dry_run: bool,
                             report: dict[str, Any]) -> None:
        with self.write():
            self.conn.execute(
                "INSERT INTO consolidation_runs (started_at, finished_at, dry_run, report) "
                "VALUES (?, ?, ?, ?)", (started, finished, int(dry_run), json.dumps(report)))
            if not dry_run:
                self.set_meta("last_consolidation", repr(finished))

    def last_consolidation(self) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT started_at, finished_at, report FROM consolidation_runs WHERE dry_run = 0 "
            "ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            return None
        return {"started_at": row[0], "finished_at": row[1], "report": json.loads(row[2])}

    # -- maintenance --------------------------------------------------------------------
    def integrity_check(self) -> list[str]:
        return [r[0] for r in self.conn.execute("PRAGMA integrity_check")]

    def rebuild_fts(self) -> None:
        with self.write():
            self.conn.execute("INSERT INTO fragments_fts(fragments_fts) VALUES ('rebuild')")

    def fts_consistent(self) -> bool:
        try:
            self.conn.execute("INSERT INTO fragments_fts(fragments_fts, rank) VALUES ('integrity-check', 1)")
        except apsw.Error:
            return False
        return True

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """For maintenance code and tests that need an ad-hoc read; callers pass parameters."""
        return [tuple(r) for r in self.conn.execute(sql, params)]

    def orphan_edges(self) -> list[str]:
        """Edges whose end is gone (possible only if foreign keys were ever off)."""
        return [r[0] for r in self.conn.execute(
            "SELECT e.id FROM edges e WHERE NOT EXISTS (SELECT 1 FROM fragments f WHERE f.id = e.source) "
            "OR NOT EXISTS (SELECT 1 FROM fragments f WHERE f.id = e.target)")]

    def dangling_supersessions(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM fragments f WHERE superseded_by IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM fragments g WHERE g.id = f.superseded_by)")]

    def repair_graph(self, edge_ids: Sequence[str], fragment_ids: Sequence[str]) -> None:
        with self.write():
            self.conn.executemany("DELETE FROM edges WHERE id = ?", [(i,) for i in edge_ids])
            self.conn.executemany("UPDATE fragments SET superseded_by = NULL WHERE id = ?",
                                  [(i,) for i in fragment_ids])
            if fragment_ids:
                self.bump_vector_epoch()

    def wal_bytes(self) -> int:
        try:
            return Path(str(self.path) + "-wal").stat().st_size
        except OSError:
            return 0

    def checkpoint(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def secure_delete(self) -> None:
        """From now on, deleted content is overwritten with zeros, not left in free pages."""
        self.conn.execute("PRAGMA secure_delete=ON")

    def purge_deleted(self) -> None:
        """Merges FTS5 segments (dropping deleted tokens) and truncates the WAL, so forgotten
        text does not linger anywhere in the database files."""
        with self.write():
            self.conn.execute("INSERT INTO fragments_fts(fragments_fts) VALUES ('optimize')")
        self.checkpoint()

    # -- export / import ----------------------------------------------------------------
    EXPORT_COLUMNS = ("id", "content", "summary", "depth", "embedding", "created_at",
                      "last_accessed", "access_count", "source_session", "superseded_by",
                      "metadata", "importance", "relevance_score", "decay_rate",
                      "last_reinforced", "project")

    def export_fragments(self) -> Iterator[dict[str, Any]]:
        cols = ", ".join(self.EXPORT_COLUMNS)
        for row in self.conn.execute(f"SELECT {cols} FROM fragments ORDER BY rowid"):
            yield dict(zip(self.EXPORT_COLUMNS, row))

    def export_edges(self) -> Iterator[dict[str, Any]]:
        keys = ("id", "source", "target", "kind", "weight", "created_at")
        for row in self.conn.execute(f"SELECT {', '.join(keys)} FROM edges ORDER BY rowid"):
            yield dict(zip(keys, row))

    def has_fragment(self, fid: str) -> bool:
        return self._one("SELECT 1 FROM fragments WHERE id = ?", (fid,)) is not None

    def has_edge(self, source: str, target: str, kind: str) -> bool:
        return self._one("SELECT 1 FROM edges WHERE source = ? AND target = ? AND kind = ?",
                         (source, target, kind)) is not None

    def import_rows(self, fragments: Sequence[dict[str, Any]], edges: Sequence[dict[str, Any]],
                    watermarks: Sequence[dict[str, Any]]) -> None:
        """Adds what is not there yet, in one transaction. Supersession pointers are set after
        every fragment exists, so the order of the file does not matter."""
        cols = self.EXPORT_COLUMNS
        with self.write():
            self.conn.executemany(
                f"INSERT OR IGNORE INTO fragments ({', '.join(cols)}) VALUES "
                f"({', '.join('?' * len(cols))})",
                [tuple(None if c == "superseded_by" else f.get(c) for c in cols) for f in fragments])
            self.conn.executemany(
                "UPDATE fragments SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL",
                [(f["superseded_by"], f["id"]) for f in fragments if f.get("superseded_by")])
            self.conn.executemany(
                "INSERT OR IGNORE INTO edges (id, source, target, kind, weight, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(e["id"], e["source"], e["target"], e["kind"], e["weight"], e["created_at"])
                 for e in edges])
            self.conn.executemany(
                "INSERT INTO watermarks (file_path, byte_offset, last_processed) VALUES (?, ?, ?) "
                "ON CONFLICT(file_path) DO UPDATE SET byte_offset = max(byte_offset, "
                "excluded.byte_offset)",
                [(w["file_path"], w["byte_offset"], w["last_processed"]) for w in watermarks])
            self.bump_vector_epoch()

    def watermark_rows(self) -> list[dict[str, Any]]:
        return [{"file_path": r[0], "byte_offset": r[1], "last_processed": r[2]}
                for r in self.conn.execute("SELECT file_path, byte_offset, last_processed FROM watermarks")]

    # -- consolidation ------------------------------------------------------------------
    # Bulk reads shaped for numpy, and writes that keep the graph consistent when a run is
    # killed between two transactions (each method here is one transaction or joins one).
    def relevance_table(self) -> list[tuple[Any, ...]]:
        """(rowid, importance, access_count, decay_rate, last_reinforced, created_at, depth,
        relevance_score) for every fragment: all numbers, so callers can build one array."""
        return self.conn.execute(
            "SELECT rowid, importance, access_count, decay_rate, last_reinforced, created_at, "
            "depth, relevance_score FROM fragments").fetchall()

    def set_relevance_if_unchanged(self, rows: Sequence[tuple[float, int, float, int]]) -> int:
        """(score, rowid, last_reinforced, access_count): a fragment recalled since the caller
        read it keeps the score that recall gave it. Returns how many were updated."""
        with self.write():
            before = self.conn.total_changes()
            self.conn.executemany(
                "UPDATE fragments SET relevance_score = ? WHERE rowid = ? "
                "AND last_reinforced = ? AND access_count = ?", rows)
            return self.conn.total_changes() - before

    def ids_by_rowid(self, rowids: Sequence[int]) -> dict[int, str]:
        rows = self._rows_in("SELECT rowid, id FROM fragments WHERE rowid IN (%s)",
                             [int(r) for r in rowids])
        return dict(rows)

    def topic_vectors(self) -> list[tuple[str, int, str, float, bytes]]:
        """(id, rowid, name, created_at, embedding) of every live, embedded topic."""
        return [tuple(r) for r in self.conn.execute(  # type: ignore[misc]
            "SELECT id, rowid, summary, created_at, embedding FROM fragments WHERE depth = 0 "
            "AND superseded_by IS NULL AND embedding IS NOT NULL ORDER BY created_at, rowid")]

    def child_vectors(self, parent_ids: Sequence[str]) -> list[tuple[str, str, str, bytes]]:
        """(parent id, id, summary, embedding) of the live, embedded children of the parents."""
        return [tuple(r) for r in self._rows_in(
            "SELECT e.source, f.id, f.summary, f.embedding FROM edges e "
            "JOIN fragments f ON f.id = e.target WHERE e.kind = 'hierarchical' "
            "AND e.source IN (%s) AND f.superseded_by IS NULL "
            "AND f.embedding IS NOT NULL ORDER BY f.created_at, f.rowid", parent_ids)]

    def merge_topic(self, victim: str, survivor: str, now: float) -> int | None:
        """One transaction: the victim's children move to the survivor, its associative edges
        follow them, and the survivor supersedes it. Returns how many children moved, or None
        when either topic stopped being live since the caller looked."""
        with self.write():
            live = self._one("SELECT count(*) FROM fragments WHERE id IN (?, ?) AND "
                             "superseded_by IS NULL", (victim, survivor))
            if live != 2:
                return None
            moved = self.reparent_children(victim, survivor, now)
            for edge in self.edges_of(victim, ("associative",)):
                other = edge.target if edge.source == victim else edge.source
                if other != survivor:
                    self.upsert_associative([(survivor, other, edge.weight)], now)
            self.conn.execute("DELETE FROM edges WHERE kind = 'associative' AND "
                              "(source = ? OR target = ?)", (victim, victim))
            self.supersede(victim, survivor, now)
        return moved

    def upsert_associative(self, pairs: Sequence[tuple[str, str, float]], now: float) -> int:
        """Undirected associative edges: an edge in either direction keeps the larger weight,
        a missing one is created. Returns how many were new."""
        new = 0
        with self.write():
            for a, b, weight in pairs:
                self.conn.execute(
                    "UPDATE edges SET weight = max(weight, ?) WHERE kind = 'associative' AND "
                    "((source = ? AND target = ?) OR (source = ? AND target = ?))",
                    (weight, a, b, b, a))
                if not self.conn.changes():
                    self.link(a, b, "associative", weight, now)
                    new += 1
        return new

    def associative_pairs(self) -> set[frozenset[str]]:
        return {frozenset(r) for r in self.conn.execute(
            "SELECT source, target FROM edges WHERE kind = 'associative'")}

    def edge_decay_preview(self, factor: float, prune_below: float) -> tuple[int, int]:
        """(associative edges, how many a decay by `factor` would prune), without writing."""
        row = self.conn.execute(
            "SELECT count(*), sum(weight * ? < ?) FROM edges WHERE kind = 'associative'",
            (factor, prune_below)).fetchone()
        return int(row[0] or 0), int(row[1] or 0)

    def weakest_associative(self, factor: float, prune_below: float,
                            limit: int) -> list[tuple[str, str, float]]:
        """(source summary, target summary, weight) of edges a decay would prune."""
        return [tuple(r) for r in self.conn.execute(  # type: ignore[misc]
            "SELECT s.summary, t.summary, e.weight FROM edges e JOIN fragments s ON s.id = "
            "e.source JOIN fragments t ON t.id = e.target WHERE e.kind = 'associative' AND "
            "e.weight * ? < ? ORDER BY e.weight LIMIT ?", (factor, prune_below, limit))]

    def child_activity(self) -> list[tuple[str, int, str, int, float, float]]:
        """(parent id, depth, metadata JSON, children, first and last time a child was
        attached) for every live fragment that has children. Edges are aggregated before the
        join: one pass over the edge index instead of a probe per fragment."""
        return [tuple(r) for r in self.conn.execute(  # type: ignore[misc]
            "SELECT a.source, p.depth, p.metadata, a.n, a.first, a.last FROM (SELECT source, "
            "count(*) AS n, min(created_at) AS first, max(created_at) AS last FROM edges "
            "WHERE kind = 'hierarchical' GROUP BY source) a JOIN fragments p ON p.id = a.source "
            "WHERE p.superseded_by IS NULL")]

    def forget_inputs(self, ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """id -> (depth, importance, access_count, decay_rate, last_reinforced, created_at)."""
        rows = self._rows_in("SELECT id, depth, importance, access_count, decay_rate, "
                             "last_reinforced, created_at FROM fragments WHERE id IN (%s)", ids)
        return {r[0]: tuple(r[1:]) for r in rows}

    def forget(self, fid: str, now: float) -> list[str]:
        """True forgetting of one fragment, in one transaction. Its children move to its
        parent. What it superseded never comes back to life: if it was itself superseded,
        those pointers move on to its replacement; if it was live, the older versions it
        replaced are forgotten with it. Topics are never deleted. Returns the deleted ids."""
        deleted: list[str] = []
        with self.write():
            row = self.conn.execute("SELECT depth, superseded_by FROM fragments WHERE id = ?",
                                    (fid,)).fetchone()
            if row is None or row[0] == 0:
                return deleted
            replacement = row[1]
            older = [r[0] for r in self.conn.execute(
                "SELECT id FROM fragments WHERE superseded_by = ? AND depth > 0", (fid,))]
            if replacement is not None:
                for old in older:
                    if old != replacement:  # a cycle in bad data is simply cleared by delete
                        self.conn.execute("UPDATE fragments SET superseded_by = ? WHERE id = ?",
                                          (replacement, old))
                        self.link(replacement, old, "supersedes", 1.0, now)
                older = []
            self.delete(fid, now)
            deleted.append(fid)
            for old in older:
                deleted += self.forget(old, now)
        return deleted

    # -- badinput branch (issue 14 §5): doctor's vector check and forget's report scrub.
    # One block so the store split can move it whole.
    def wrong_length_embeddings(self, size: int) -> list[str]:
        """Ids of fragments whose vector is not `size` bytes (an old import, a hand edit)."""
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM fragments WHERE embedding IS NOT NULL AND length(embedding) != ?",
            (size,))]

    def clear_embeddings(self, ids: Sequence[str]) -> None:
        """Drops these vectors, so that a backfill embeds the fragments again."""
        with self.write():
            self.conn.executemany("UPDATE fragments SET embedding = NULL WHERE id = ?",
                                  [(i,) for i in ids])
            self.bump_vector_epoch()

    def consolidation_reports(self) -> list[tuple[int, str]]:
        """(run id, report JSON) of every recorded consolidation run."""
        return [(r[0], r[1]) for r in self.conn.execute(
            "SELECT id, report FROM consolidation_runs ORDER BY id")]

    def set_consolidation_reports(self, reports: Sequence[tuple[int, str]]) -> None:
        with self.write():
            self.conn.executemany("UPDATE consolidation_runs SET report = ? WHERE id = ?",
                                  [(text, rid) for rid, text in reports])
