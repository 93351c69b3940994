"""Bulk copy into a space keeping ids (`lore hub push`, and pull's reverse): rows as
store/backup.py exports them. A row whose id the space already holds is left as it is, so
a second push adds nothing, and a push cut off midway is finished by running it again."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

from ..safety.redact import redact
from . import vector_index
from .copy_rows import check_vector, copy_binary
from .fragments import Fragments
from .rows import EXPORT_COLUMNS, stored_cues
from .state import STATE_JOIN, joined
from .vectors import vector_blob

COLUMNS = EXPORT_COLUMNS  # the same row shape both ways, cues included
BATCH = 1000  # rows a transaction: a dropped connection costs one batch's retry
EDGE_KEYS = "id, source, target, kind, weight, created_at"
_VECTOR, _SUMMARY, _CONTENT, _CREATED = (COLUMNS.index(c) for c in
                                         ("embedding", "summary", "content", "created_at"))
_TYPES = {"depth": "int4", "embedding": "vector", "access_count": "int4",
          "created_at": "float8", "last_accessed": "float8", "importance": "float8",
          "relevance_score": "float8", "decay_rate": "float8", "last_reinforced": "float8",
          "confirmed_at": "float8"}
_COPY_TYPES = [_TYPES.get(c, "text") for c in COLUMNS]
# Staging tables live for one batch (dropped after it, and with its transaction if it fails).
_FRAGMENT_STAGE = ("CREATE TEMP TABLE lore_push_fragments (" + ", ".join(
    f"{c} {_TYPES.get(c, 'text')}" for c in COLUMNS) + ") ON COMMIT DROP")
_EDGE_STAGE = ("CREATE TEMP TABLE lore_push_edges (id text, source text, target text, "
               "kind text, weight float8, created_at float8) ON COMMIT DROP")


class Transfer(Fragments):
    def insert_rows(self, fragments: Sequence[dict[str, Any]],
                    edges: Sequence[dict[str, Any]] = ()) -> tuple[int, int]:
        """Adds the fragments and edges the space lacks; returns (fragments, edges) added.
        Text is redacted here as on every write; vectors claim the space's model."""
        added = [0, 0]
        for start in range(0, len(fragments), BATCH):
            added[0] += self._atomic(lambda part=fragments[start:start + BATCH]:  # type: ignore[misc]
                                     self._insert_fragments(part))
        for start in range(0, len(edges), BATCH):
            added[1] += self._atomic(lambda part=edges[start:start + BATCH]:  # type: ignore[misc]
                                     self._insert_edges(part))
        return added[0], added[1]

    @contextlib.contextmanager
    def bulk_load(self, incoming: int) -> Iterator[bool]:
        """Around insert_rows calls that bring about `incoming` new fragments: a large load
        into a small hub builds the vector index once at the end (vector_index.py says when
        and why that is safe); yields whether it does. An index a load cut off earlier left
        missing is built first."""
        vector_index.ensure(self.url)
        with vector_index.set_aside(self.url, incoming) as aside:
            yield aside

    def _insert_fragments(self, part: Sequence[dict[str, Any]]) -> int:
        """One batch in a few round trips: the ids the space holds already, a COPY of the
        others into a staging table, one INSERT of those the space still lacks (RETURNING
        which: another writer may have added some meanwhile), the written dates of those."""
        present = set(self._present([f["id"] for f in part]))  # a second push stops here
        rows = [_fragment_row(f) for f in part if f["id"] not in present]
        if not rows:
            return 0
        if any(r[_VECTOR] is not None for r in rows):
            self._claim_model()
        with self._cursor() as cur:
            cur.execute(_FRAGMENT_STAGE)
            copy_binary(cur, "lore_push_fragments", COLUMNS, _COPY_TYPES, rows)
            cur.execute(f"INSERT INTO fragments (space, {', '.join(COLUMNS)}) SELECT %s, "
                        f"{', '.join(COLUMNS)} FROM lore_push_fragments ON CONFLICT (space, id) "
                        "DO NOTHING RETURNING id", (self.space,))
            new = {r[0] for r in cur.fetchall()}
            cur.execute("DROP TABLE lore_push_fragments")  # a caller's transaction may go on
        self._date_many([(r[0], r[_SUMMARY], r[_CONTENT], r[_CREATED]) for r in rows
                         if r[0] in new])
        return len(new)

    def _insert_edges(self, part: Sequence[dict[str, Any]]) -> int:
        """The edges whose two ends are in the space, in one COPY and one INSERT."""
        with self._cursor() as cur:
            cur.execute(_EDGE_STAGE)
            with cur.copy(f"COPY lore_push_edges ({EDGE_KEYS}) FROM STDIN") as copy:
                for e in part:
                    copy.write_row(tuple(e[k] for k in EDGE_KEYS.split(", ")))
            cur.execute(
                f"INSERT INTO edges (space, {EDGE_KEYS}) SELECT %(s)s, {EDGE_KEYS} FROM "
                "lore_push_edges p WHERE EXISTS (SELECT 1 FROM fragments f WHERE f.space = %(s)s "
                "AND f.id = p.source) AND EXISTS (SELECT 1 FROM fragments f WHERE "
                "f.space = %(s)s AND f.id = p.target) ON CONFLICT DO NOTHING", {"s": self.space})
            added = max(cur.rowcount, 0)
            cur.execute("DROP TABLE lore_push_edges")
            return added

    def _present(self, ids: Sequence[str]) -> list[str]:
        return [r[0] for r in self._all("SELECT id FROM fragments WHERE space = %s AND "
                                        "id = ANY(%s)", (self.space, list(ids)))]

    def export_fragments(self) -> Iterator[dict[str, Any]]:
        """Every fragment of the space in insertion order, as store/backup.py exports."""
        cols = joined(", ".join("embedding::real[]" if c == "embedding" else c for c in COLUMNS))
        for row in self._all(f"SELECT {cols.replace('embedding::', 'f.embedding::')} FROM "
                             f"fragments f {STATE_JOIN} WHERE f.space = %s ORDER BY f.seq",
                             (self.space,)):
            out = dict(zip(COLUMNS, row))
            out["embedding"] = None if out["embedding"] is None else vector_blob(out["embedding"])
            yield out

    def export_edges(self) -> Iterator[dict[str, Any]]:
        keys = ("id", "source", "target", "kind", "weight", "created_at")
        for row in self._all(f"SELECT {', '.join(keys)} FROM edges WHERE space = %s ORDER BY id",
                             (self.space,)):
            yield dict(zip(keys, row))


def _fragment_row(f: dict[str, Any]) -> tuple[Any, ...]:
    """A row in COLUMNS' order for copy_binary: text redacted, numbers as their column's
    type, the vector as it is stored (checked for its size there)."""
    values: list[Any] = []
    for c in COLUMNS:
        v = f.get(c)
        if c in ("summary", "content"):
            v = redact(v or "")
        elif c == "cues":  # a row without them (an older export) has none
            v = stored_cues(v)
        elif c == "metadata" and not isinstance(v, str):
            v = json.dumps(v or {})
        elif c == "embedding":
            check_vector(v)
        elif v is not None and c in _TYPES and c != "embedding":
            v = int(v) if _TYPES[c] == "int4" else float(v)
        values.append(v)
    return tuple(values)
