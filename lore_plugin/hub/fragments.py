"""Fragments of one space: insert (redacted, as store/fragments.py redacts), get (one, many,
by id prefix, by summary), counts, text and memory-state updates, supersession, deletion.
Same names and semantics as the SQLite store's, so the memory engine cannot tell them apart.

An insert with a known id is idempotent (ON CONFLICT DO NOTHING), so an insert retried
after a connection dropped at its commit neither fails nor duplicates."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..core.errors import AmbiguousId, InvalidInput, NotFound
from ..core.relevance import decay_rate_for
from ..core.types import Fragment, NewFragment
from ..safety.redact import redact
from ..store.connection import new_id
from ..store.rows import FRAGMENT_NUMBERS, row_to_fragment
from .dates import Dates
from .errors import HubAccessDenied
from .rows import COLUMNS, NUMBERS_WIDTH, WIDTH, stored_cues, to_fragment
from .state import STATE_JOIN, MemoryStates, joined
from .tree import Tree
from .vectors import Vectors

_ID_PREFIX = re.compile(r"^[0-9a-fA-F-]{8,64}$")
_PARENT_OF = ("(SELECT source FROM edges e WHERE e.space = f.space AND e.target = f.id AND "
              "e.kind = 'hierarchical' LIMIT 1)")


class Fragments(Tree, Vectors, Dates, MemoryStates):
    def insert(self, new: NewFragment, now: float, embedding: bytes | None = None,
               parent_id: str | None = None) -> str:
        fid = new.id or new_id()  # chosen before the first attempt: a retry reuses it
        created = new.created_at if new.created_at is not None else now
        summary, content, cues = redact(new.summary), redact(new.content), stored_cues(new.cues)
        vector = None if embedding is None else self._vector_param(embedding)

        def work() -> None:
            if vector is not None:
                self._claim_model()
            added = self._run(
                "INSERT INTO fragments (space, id, content, summary, depth, embedding, "
                "created_at, last_accessed, access_count, source_session, metadata, importance, "
                "relevance_score, decay_rate, last_reinforced, project, source, basis, "
                "confirmed_at, cues) VALUES (%s, %s, %s, %s, %s, %s::vector, %s, %s, 0, %s, %s, "
                "%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (space, id) DO NOTHING",
                (self.space, fid, content, summary, new.depth, vector, created, created,
                 new.source_session, json.dumps(new.metadata), new.importance,
                 new.importance * 1.3, decay_rate_for(new.importance), created, new.project,
                 new.source, new.basis, new.confirmed_at, cues))
            if added and parent_id is not None:
                self.link(parent_id, fid, "hierarchical", 1.0, now)
            if added:
                self._date_written(fid, summary, content, created)
        self._atomic(work)
        return fid

    def get(self, fid: str) -> Fragment:
        rows = self._all(f"SELECT {joined(COLUMNS)}, {_PARENT_OF} FROM fragments f "
                         f"{STATE_JOIN} WHERE f.space = %s AND f.id = %s", (self.space, fid))
        if not rows:
            raise NotFound(f"no fragment with id {fid} in space '{self.space}'; use "
                           "query_memory or list_topics to find ids")
        return to_fragment(rows[0], rows[0][WIDTH])

    def get_many(self, ids: Sequence[str], with_text: bool = True,
                 with_parent: bool = True) -> dict[str, Fragment]:
        if not ids:
            return {}
        columns, at, make = ((COLUMNS, WIDTH, to_fragment) if with_text
                             else (FRAGMENT_NUMBERS, NUMBERS_WIDTH, row_to_fragment))
        parent = f", {_PARENT_OF}" if with_parent else ""
        rows = self._all(f"SELECT {joined(columns)}{parent} FROM fragments f {STATE_JOIN} "
                         "WHERE f.space = %s AND f.id = ANY(%s)", (self.space, list(ids)))
        return {r[0]: make(r, r[at] if with_parent else None) for r in rows}

    def has_fragment(self, fid: str) -> bool:
        return self._one("SELECT 1 FROM fragments WHERE space = %s AND id = %s",
                         (self.space, fid)) is not None

    def resolve_id(self, given: str) -> str:
        """Accepts a full id or a unique prefix of 8+ characters."""
        given = given.strip().lower()
        if not _ID_PREFIX.match(given):
            raise InvalidInput(
                f"'{given[:40]}' is not a fragment id: ids are hex, give at least 8 characters")
        rows = self._all("SELECT id FROM fragments WHERE space = %s AND id >= %s AND id < %s "
                         "ORDER BY id LIMIT 6", (self.space, given, given + "\uffff"))
        if any(r[0] == given for r in rows):
            return given
        if not rows:
            raise NotFound(f"no fragment id starts with {given}; use query_memory to find ids")
        if len(rows) > 1:
            shown = ", ".join(r[0][:12] for r in rows[:5])
            raise AmbiguousId(f"{given} matches several fragments ({shown}); give more characters")
        return str(rows[0][0])

    def ids_by_prefix(self, prefixes: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for prefix in prefixes:
            rows = self._all("SELECT id FROM fragments WHERE space = %s AND id >= %s AND "
                             "id < %s ORDER BY id LIMIT 2", (self.space, prefix, prefix + "\uffff"))
            if len(rows) == 1:
                found[prefix] = str(rows[0][0])
        return found

    def find_by_summary(self, summary: str, depth: int | None = None,
                        parent_id: str | None = None) -> str | None:
        sql = ("SELECT f.id FROM fragments f WHERE f.space = %s AND lower(f.summary) = "
               "lower(%s) AND f.superseded_by IS NULL")
        params: list[Any] = [self.space, summary.strip()]
        if depth is not None:
            sql += " AND f.depth = %s"
            params.append(depth)
        if parent_id is not None:
            sql += (" AND EXISTS (SELECT 1 FROM edges e WHERE e.space = f.space AND "
                    "e.target = f.id AND e.source = %s AND e.kind = 'hierarchical')")
            params.append(parent_id)
        return self._one(sql + " ORDER BY f.seq LIMIT 1", params)

    def without_cues(self, limit: int) -> list[str]:
        """Up to `limit` live facts and details without cues, not asked for them yet
        (core/cues.CUES_ASKED_AT), the newest stored first: store/fragments.py's read."""
        from ..core.cues import CUES_ASKED_AT

        return [r[0] for r in self._all(
            "SELECT id FROM fragments WHERE space = %s AND cues = '' AND depth >= 2 AND "
            "superseded_by IS NULL AND metadata NOT LIKE %s ORDER BY seq DESC LIMIT %s",
            (self.space, f'%"{CUES_ASKED_AT}"%', limit))]

    def count_fragments(self, include_superseded: bool = True) -> int:
        hide = "" if include_superseded else " AND superseded_by IS NULL"
        return int(self._one(f"SELECT count(*) FROM fragments WHERE space = %s{hide}",
                             (self.space,)))

    def counts(self) -> dict[str, int]:
        row = self._all(
            "SELECT count(*), count(*) FILTER (WHERE depth = 0), count(superseded_by), "
            "count(*) FILTER (WHERE embedding IS NULL), (SELECT count(*) FROM edges "
            "WHERE space = %(s)s) FROM fragments WHERE space = %(s)s", {"s": self.space})[0]
        keys = ("fragments", "topics", "superseded", "without_embedding", "edges")
        return {k: int(v or 0) for k, v in zip(keys, row)}

    def update_text(self, fid: str, summary: str | None = None, content: str | None = None,
                    embedding: bytes | None = None, cues: str | None = None) -> None:
        """Sets the text given (None keeps it): summary, content, cues (one a line), each
        redacted; the words the keyword search holds follow (words_sql.py, cues_sql.py)."""
        summary = None if summary is None else redact(summary)
        content = None if content is None else redact(content)
        cues = None if cues is None else stored_cues(cues)
        vector = None if embedding is None else self._vector_param(embedding)

        def work() -> None:
            self._run("UPDATE fragments SET summary = coalesce(%s, summary), content = "
                      "coalesce(%s, content), cues = coalesce(%s, cues) WHERE space = %s AND "
                      "id = %s", (summary, content, cues, self.space, fid))
            if summary is not None or content is not None:
                self._redate_written([fid])
            if vector is not None:
                self._claim_model()
                self._run("UPDATE fragments SET embedding = %s::vector WHERE space = %s AND "
                          "id = %s", (vector, self.space, fid))
        self._atomic(work)

    def confirm(self, ids: Sequence[str], now: float) -> int:
        """Marks fragments confirmed; the first confirmation's time is kept."""
        return self._atomic(lambda: self._run(
            "UPDATE fragments SET confirmed_at = %s WHERE space = %s AND confirmed_at IS NULL "
            "AND id = ANY(%s)", (now, self.space, list(ids))))

    def set_metadata(self, fid: str, metadata: dict[str, Any]) -> None:
        self._atomic(lambda: self._run(
            "UPDATE fragments SET metadata = %s WHERE space = %s AND id = %s",
            (json.dumps(metadata), self.space, fid)))

    def supersede(self, old: str, new: str, now: float) -> None:
        if old == new:
            raise InvalidInput("a fragment cannot supersede itself")

        def work() -> None:
            self._run("UPDATE fragments SET superseded_by = %s WHERE space = %s AND id = %s",
                      (new, self.space, old))
            self.link(new, old, "supersedes", 1.0, now)
        self._atomic(work)

    def delete(self, fid: str, now: float) -> None:
        """Deletes one fragment; its children move to its parent first, edges and dates
        cascade, and supersession pointers to it are cleared."""
        def work() -> None:
            parent = self.parent_id(fid)
            self.reparent_children(fid, parent, now)
            self._run("UPDATE fragments SET superseded_by = NULL WHERE space = %s AND "
                      "superseded_by = %s", (self.space, fid))
            gone = self._run("DELETE FROM fragments WHERE space = %s AND id = %s",
                             (self.space, fid))
            # Row-level security filters a delete it refuses (the fragment is another
            # member's, forget_sql.py): raising rolls the moves above back with it.
            if not gone and self.has_fragment(fid):
                raise HubAccessDenied(f"only its author or an owner of space '{self.space}' "
                                      f"may delete fragment {fid[:8]}")
        self._atomic(work)
