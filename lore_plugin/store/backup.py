"""Export and import rows: every fragment, edge and watermark out, and what is missing in."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .vectors import Vectors
from .written import WrittenDates

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any


class Backup(Vectors, WrittenDates):
    # A row as this store exports and imports it, and as the hub's push and pull move it
    # (hub/transfer.py): the hub keeps cues too (its migration 7).
    EXPORT_COLUMNS = ("id", "content", "summary", "depth", "embedding", "created_at",
                      "last_accessed", "access_count", "source_session", "superseded_by",
                      "metadata", "importance", "relevance_score", "decay_rate",
                      "last_reinforced", "project", "source", "basis", "confirmed_at", "cues")

    def export_fragments(self) -> Iterator[dict[str, Any]]:
        cols = ", ".join(self.EXPORT_COLUMNS)
        for row in self.conn.execute(f"SELECT {cols} FROM fragments ORDER BY rowid"):
            yield dict(zip(self.EXPORT_COLUMNS, row))

    def export_edges(self) -> Iterator[dict[str, Any]]:
        keys = ("id", "source", "target", "kind", "weight", "created_at")
        for row in self.conn.execute(f"SELECT {', '.join(keys)} FROM edges ORDER BY rowid"):
            yield dict(zip(keys, row))

    def export_redirects(self) -> Iterator[dict[str, Any]]:
        """store_memory ids that repeated a fragment (schema 9): each still names its target."""
        for row in self.conn.execute("SELECT id, target FROM fragment_redirects ORDER BY id"):
            yield {"id": row[0], "target": row[1]}

    def watermark_rows(self) -> list[dict[str, Any]]:
        return [{"file_path": r[0], "byte_offset": r[1], "last_processed": r[2]}
                for r in self.conn.execute("SELECT file_path, byte_offset, last_processed FROM watermarks")]

    def has_fragment(self, fid: str) -> bool:
        return self._one("SELECT 1 FROM fragments WHERE id = ?", (fid,)) is not None

    def has_edge(self, source: str, target: str, kind: str) -> bool:
        return self._one("SELECT 1 FROM edges WHERE source = ? AND target = ? AND kind = ?",
                         (source, target, kind)) is not None

    def import_rows(self, fragments: Sequence[dict[str, Any]], edges: Sequence[dict[str, Any]],
                    watermarks: Sequence[dict[str, Any]],
                    redirects: Sequence[dict[str, Any]] = ()) -> None:
        """Adds what is not there yet, in one transaction. Supersession pointers are set after
        every fragment exists, so the order of the file does not matter; so are redirects
        (their targets must exist: the foreign key)."""
        from ..safety.redact import redact

        cols = self.EXPORT_COLUMNS
        text = ("summary", "content", "cues")  # imported text is redacted like every write,
        rows = [tuple(None if c == "superseded_by" else redact(f[c]) if c in text and  # and
                      isinstance(f.get(c), str) else f.get(c) for c in cols)  # before the lock
                for f in map(_provenance, map(_with_cues, fragments))]
        with self.write():
            self.conn.executemany(
                f"INSERT OR IGNORE INTO fragments ({', '.join(cols)}) VALUES "
                f"({', '.join('?' * len(cols))})", rows)
            self.conn.executemany(
                "UPDATE fragments SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL",
                [(f["superseded_by"], f["id"]) for f in fragments if f.get("superseded_by")])
            self._redate_written([f["id"] for f in fragments])  # dated by their stored text
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
            self.conn.executemany(  # never over a fragment's own id, never over a redirect
                "INSERT OR IGNORE INTO fragment_redirects (id, target) SELECT ?, ? WHERE NOT "
                "EXISTS (SELECT 1 FROM fragments WHERE id = ?)",
                [(r["id"], r["target"], r["id"]) for r in redirects])
            self.bump_vector_epoch()


def _with_cues(row: dict[str, Any]) -> dict[str, Any]:
    """Cues in clean_cues's form; none for a row exported before they existed."""
    from ..core.cues import clean_cues

    cues = row.get("cues")
    return {**row, "cues": clean_cues(cues) if isinstance(cues, str) else ""}


def _provenance(row: dict[str, Any]) -> dict[str, Any]:
    """A row restored from Lore's own backup keeps its source; one without a known source is
    labelled as imported. Basis and confirmation must be what Lore itself would write."""
    from ..core.types import BASES, SOURCES

    confirmed = row.get("confirmed_at")
    return {**row, "source": row.get("source") if row.get("source") in SOURCES else "import",
            "basis": row.get("basis") if row.get("basis") in BASES else None,
            "confirmed_at": confirmed if isinstance(confirmed, int | float)
            and not isinstance(confirmed, bool) and 0 <= confirmed < 1e11 else None}
