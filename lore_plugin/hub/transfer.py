"""Bulk copy into a space keeping ids (`lore hub push`, and pull's reverse): rows as
store/backup.py exports them. A row whose id the space already holds is left as it is, so
a second push adds nothing, and a push cut off midway is finished by running it again."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from ..safety.redact import redact
from ..store.backup import Backup
from .fragments import Fragments
from .vectors import vector_blob, vector_text

COLUMNS = Backup.EXPORT_COLUMNS  # the same row shape both ways
BATCH = 1000  # rows a transaction: a dropped connection costs one batch's retry


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

    def _insert_fragments(self, part: Sequence[dict[str, Any]]) -> int:
        rows = [_fragment_row(self.space, f) for f in part]
        if any(r[5] is not None for r in rows):
            self._claim_model()
        cols = ", ".join(COLUMNS)
        marks = ", ".join("%s::vector" if c == "embedding" else "%s" for c in COLUMNS)
        ids = [f["id"] for f in part]
        before = set(self._present(ids))
        self._many(f"INSERT INTO fragments (space, {cols}) VALUES (%s, {marks}) "
                   "ON CONFLICT (space, id) DO NOTHING",
                   [r for r in rows if r[1] not in before])
        self._many("UPDATE fragments SET superseded_by = %s WHERE space = %s AND id = %s AND "
                   "superseded_by IS NULL",
                   [(f["superseded_by"], self.space, f["id"]) for f in part
                    if f.get("superseded_by") and f["id"] not in before])
        new = [f for f in part if f["id"] not in before]
        self._date_many([(f["id"], redact(f["summary"]), redact(f["content"]), f["created_at"])
                         for f in new])
        return len(new)

    def _insert_edges(self, part: Sequence[dict[str, Any]]) -> int:
        """Edges whose two ends are in the space, in one pipelined batch."""
        ends = {e["source"] for e in part} | {e["target"] for e in part}
        present = set(self._present(list(ends)))
        rows = [(self.space, e["id"], e["source"], e["target"], e["kind"], e["weight"],
                 e["created_at"]) for e in part
                if e["source"] in present and e["target"] in present]
        before = int(self._one("SELECT count(*) FROM edges WHERE space = %s AND id = ANY(%s)",
                               (self.space, [r[1] for r in rows])))
        self._many("INSERT INTO edges (space, id, source, target, kind, weight, created_at) "
                   "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", rows)
        after = int(self._one("SELECT count(*) FROM edges WHERE space = %s AND id = ANY(%s)",
                              (self.space, [r[1] for r in rows])))
        return after - before

    def _present(self, ids: Sequence[str]) -> list[str]:
        return [r[0] for r in self._all("SELECT id FROM fragments WHERE space = %s AND "
                                        "id = ANY(%s)", (self.space, list(ids)))]

    def export_fragments(self) -> Iterator[dict[str, Any]]:
        """Every fragment of the space in insertion order, as store/backup.py exports."""
        cols = ", ".join("embedding::real[]" if c == "embedding" else c for c in COLUMNS)
        for row in self._all(f"SELECT {cols} FROM fragments WHERE space = %s ORDER BY seq",
                             (self.space,)):
            out = dict(zip(COLUMNS, row))
            out["embedding"] = None if out["embedding"] is None else vector_blob(out["embedding"])
            yield out

    def export_edges(self) -> Iterator[dict[str, Any]]:
        keys = ("id", "source", "target", "kind", "weight", "created_at")
        for row in self._all(f"SELECT {', '.join(keys)} FROM edges WHERE space = %s ORDER BY id",
                             (self.space,)):
            yield dict(zip(keys, row))


def _fragment_row(space: str, f: dict[str, Any]) -> tuple[Any, ...]:
    values: list[Any] = [space]
    for c in COLUMNS:
        v = f.get(c)
        if c in ("summary", "content"):
            v = redact(v or "")
        elif c == "embedding":
            v = None if v is None else vector_text(v)
        elif c == "superseded_by":
            v = None  # set once every row of the batch exists
        elif c == "metadata" and not isinstance(v, str):
            v = json.dumps(v or {})
        values.append(v)
    return tuple(values)
