"""Fragments themselves: insert, get (one, many, by id prefix, by summary), counts, text and
memory-state updates, supersession and deletion."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..core.errors import AmbiguousId, InvalidInput, NotFound
from .connection import IN_CHUNK, new_id
from .hierarchy import Hierarchy
from .rows import CUES, CUES_READ, FRAGMENT_COLUMNS, FRAGMENT_NUMBERS, PARENT, row_to_fragment
from .vectors import Vectors
from .written import WrittenDates

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any

    from ..core.relevance import MemoryState
    from ..core.types import Fragment, NewFragment

_ID_PREFIX = re.compile(r"^[0-9a-fA-F-]{8,64}$")


def _decay_rate_for(importance: float) -> float:
    from ..core.relevance import decay_rate_for

    return decay_rate_for(importance)


def _redacted_cues(cues: str) -> str:
    """Cues as kept: redacted like the text, then normalised again (a redaction may make two
    phrases the same)."""
    from ..core.cues import clean_cues
    from ..safety.redact import redact

    return clean_cues(redact(cues)) if cues else ""


class Fragments(Hierarchy, Vectors, WrittenDates):
    def insert(self, new: NewFragment, now: float, embedding: bytes | None = None,
               parent_id: str | None = None) -> str:
        """Every fragment is written here, whoever made it (ingestion, store_memory, lore
        remember, consolidation), so this is where its text, cues included, is redacted."""
        from ..safety.redact import redact

        fid = new.id or new_id()
        created = new.created_at if new.created_at is not None else now
        summary, content = redact(new.summary), redact(new.content)
        cues = _redacted_cues(new.cues)
        with self.write():
            self.conn.execute(
                "INSERT INTO fragments (id, content, summary, depth, embedding, created_at, "
                "last_accessed, access_count, source_session, metadata, importance, "
                "relevance_score, decay_rate, last_reinforced, project, source, basis, "
                "confirmed_at, cues) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?)",
                (fid, content, summary, new.depth, embedding, created,
                 created, new.source_session, json.dumps(new.metadata), new.importance,
                 new.importance * 1.3, _decay_rate_for(new.importance), created, new.project,
                 new.source, new.basis, new.confirmed_at, cues),
            )
            if parent_id is not None:
                self.link(parent_id, fid, "hierarchical", 1.0, now)
            self._date_written(fid, summary, content, created)
        return fid

    def get(self, fid: str) -> Fragment:
        row = self.conn.execute(
            f"SELECT {FRAGMENT_COLUMNS}, NULL, {CUES_READ} FROM fragments WHERE id = ?",
            (fid,)).fetchone()
        if row is None:
            raise NotFound(f"no fragment with id {fid}; use query_memory or list_topics to find ids")
        return row_to_fragment(row, self.parent_id(fid), row[CUES])

    def get_many(self, ids: Sequence[str], with_text: bool = True,
                 with_parent: bool = True) -> dict[str, Fragment]:
        """The fragments with these ids. `with_text=False` leaves content, summary and
        metadata empty, and `with_parent=False` leaves parent_id None: ranking a query's few
        hundred candidates needs only the numbers, and skipping the text and the parent
        lookup more than halves the cost (recall/memory.py fetches the text of the winners and the
        parents it climbs through). The text includes the cues."""
        columns = FRAGMENT_COLUMNS if with_text else FRAGMENT_NUMBERS
        cues = CUES_READ if with_text else "''"
        if not with_parent:
            return {row[0]: row_to_fragment(row, None, row[CUES]) for row in self._rows_in(
                f"SELECT {columns}, NULL, {cues} FROM fragments WHERE id IN (%s)", ids)}
        rows = self._rows_in(
            f"SELECT {columns}, (SELECT source FROM edges WHERE target = f.id AND "
            f"kind = 'hierarchical' LIMIT 1), {cues} FROM fragments f WHERE id IN (%s)", ids)
        return {row[0]: row_to_fragment(row, row[PARENT], row[CUES]) for row in rows}

    def resolve_id(self, given: str) -> str:
        """Accepts a full id or a unique prefix of 8+ characters."""
        given = given.strip().lower()
        if not _ID_PREFIX.match(given):
            raise InvalidInput(
                f"'{given[:40]}' is not a fragment id: ids are hex, give at least 8 characters")
        if self._one("SELECT 1 FROM fragments WHERE id = ?", (given,)):
            return given
        moved = self._one("SELECT target FROM fragment_redirects WHERE id = ?", (given,))
        if moved is not None:  # a store_memory id that repeated this fragment: it names the
            return self.live_version(str(moved))  # fact, so a merge's survivor now
        rows = self.conn.execute(
            "SELECT id FROM fragments WHERE id >= ? AND id < ? ORDER BY id LIMIT 6",
            (given, given + "\U0010ffff")).fetchall()
        if not rows:  # the short id a store_memory answer showed for what became a repeat
            rows = self.conn.execute(
                "SELECT id, target FROM fragment_redirects WHERE id >= ? AND id < ? "
                "ORDER BY id LIMIT 6", (given, given + "\U0010ffff")).fetchall()
            targets = {self.live_version(str(target)) for _, target in rows}
            if len(targets) == 1:  # one fact, however many repeats of it share the prefix
                return targets.pop()
        if not rows:
            raise NotFound(f"no fragment id starts with {given}; use query_memory to find ids")
        if len(rows) > 1:
            shown = ", ".join(r[0][:12] for r in rows[:5])
            raise AmbiguousId(f"{given} matches several fragments ({shown}); give more characters")
        return str(rows[0][0])

    def live_version(self, fid: str) -> str:
        """`fid`, or the fragment that superseded it (a merge's survivor), followed to the
        live end of the chain (bounded: an imported loop must not hang)."""
        for _ in range(32):
            newer = self._one("SELECT superseded_by FROM fragments WHERE id = ?", (fid,))
            if not newer:
                break
            fid = str(newer)
        return fid

    def redirect(self, reserved: str, target: str) -> None:
        """store_memory gave out `reserved` for a request that repeated `target`."""
        with self.write():
            self.conn.execute("INSERT OR REPLACE INTO fragment_redirects (id, target) "
                              "VALUES (?, ?)", (reserved, target))

    def known_ids(self, ids: Sequence[str]) -> dict[str, str]:
        """Of `ids`, those the database knows, each with the fragment it names (itself, or
        the one a redirect points to): a store journal row whose id is here was placed."""
        found = {row[0]: row[0] for row in self._rows_in(
            "SELECT id FROM fragments WHERE id IN (%s)", ids)}
        found.update({row[0]: row[1] for row in self._rows_in(
            "SELECT id, target FROM fragment_redirects WHERE id IN (%s)", ids)})
        return found

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

    def without_cues(self, limit: int) -> list[str]:
        """Up to `limit` live facts and details (depth 2 and below) that have no cues and
        were not asked for them yet (core/cues.CUES_ASKED_AT), the newest stored first.
        Walked down the rowid, so a read stops at `limit` rather than scan every row."""
        from ..core.cues import CUES_ASKED_AT

        return [row[0] for row in self.conn.execute(
            "SELECT id FROM fragments WHERE cues = '' AND depth >= 2 AND superseded_by IS NULL "
            "AND metadata NOT LIKE ? ORDER BY rowid DESC LIMIT ?",
            (f'%"{CUES_ASKED_AT}"%', limit))]

    def count_fragments(self, include_superseded: bool = True) -> int:
        hide = "" if include_superseded else " WHERE superseded_by IS NULL"
        return int(self._one(f"SELECT count(*) FROM fragments{hide}"))

    def counts(self) -> dict[str, int]:
        row = self.conn.execute(
            "SELECT count(*), sum(depth = 0), sum(superseded_by IS NOT NULL), "
            "sum(embedding IS NULL), (SELECT count(*) FROM edges) FROM fragments").fetchone()
        keys = ("fragments", "topics", "superseded", "without_embedding", "edges")
        return {k: int(v or 0) for k, v in zip(keys, row)}

    def save_memory_states(self, states: dict[str, tuple[MemoryState, float]]) -> None:
        """id -> (new state, new relevance score)."""
        with self.write():
            self.conn.executemany(
                "UPDATE fragments SET access_count = ?, decay_rate = ?, last_accessed = ?, "
                "last_reinforced = ?, relevance_score = ? WHERE id = ?",
                [(s.access_count, s.decay_rate, s.last_accessed, s.last_reinforced, r, i)
                 for i, (s, r) in states.items()])

    def update_text(self, fid: str, summary: str | None = None, content: str | None = None,
                    embedding: bytes | None = None, cues: str | None = None) -> None:
        """`cues` replaces the fragment's cues (clean_cues's form, redacted here)."""
        from ..safety.redact import redact

        summary = None if summary is None else redact(summary)
        content = None if content is None else redact(content)
        with self.write():
            if cues is not None:
                self.conn.execute("UPDATE fragments SET cues = ? WHERE id = ?",
                                  (_redacted_cues(cues), fid))
            if summary is not None:
                self.conn.execute("UPDATE fragments SET summary = ? WHERE id = ?", (summary, fid))
            if content is not None:
                self.conn.execute("UPDATE fragments SET content = ? WHERE id = ?", (content, fid))
            if summary is not None or content is not None:
                self._redate_written([fid])
            if embedding is not None:
                self.conn.execute("UPDATE fragments SET embedding = ? WHERE id = ?", (embedding, fid))
                self.bump_vector_epoch()

    def confirm(self, ids: Sequence[str], now: float) -> int:
        """Marks fragments as confirmed by the user (or restated in a later conversation);
        the first confirmation's time is kept."""
        with self.write():
            before = self.conn.total_changes()
            for chunk in range(0, len(ids), IN_CHUNK):
                part = list(ids[chunk:chunk + IN_CHUNK])
                self.conn.execute(
                    f"UPDATE fragments SET confirmed_at = ? WHERE confirmed_at IS NULL AND id IN "
                    f"({', '.join('?' * len(part))})", (now, *part))
            return int(self.conn.total_changes() - before)

    def set_metadata(self, fid: str, metadata: dict[str, Any]) -> None:
        with self.write():
            self.conn.execute("UPDATE fragments SET metadata = ? WHERE id = ?",
                              (json.dumps(metadata), fid))

    def supersede(self, old: str, new: str, now: float) -> None:
        if old == new:
            raise InvalidInput("a fragment cannot supersede itself")
        with self.write():
            self.conn.execute("UPDATE fragments SET superseded_by = ? WHERE id = ?", (new, old))
            self.link(new, old, "supersedes", 1.0, now)
            self.bump_vector_epoch()

    def delete(self, fid: str, now: float) -> None:
        """Deletes one fragment; its children move to its parent first. The FTS row goes with
        it (trigger), edges cascade, and supersession pointers to it are cleared."""
        with self.write():
            parent = self.parent_id(fid)
            self.reparent_children(fid, parent, now)
            self.conn.execute("UPDATE fragments SET superseded_by = NULL WHERE superseded_by = ?",
                              (fid,))
            # A store_memory id that redirected here follows a merge's survivor rather than
            # vanish with the fragment (the foreign key would drop it).
            self.conn.execute("UPDATE fragment_redirects SET target = (SELECT superseded_by "
                              "FROM fragments WHERE id = ?1) WHERE target = ?1 AND (SELECT "
                              "superseded_by FROM fragments WHERE id = ?1) IS NOT NULL", (fid,))
            self.conn.execute("DELETE FROM fragments WHERE id = ?", (fid,))
            self.bump_vector_epoch()
