"""Embeddings: the vector blobs and what the in-memory vector index loads from them (rows
streamed by rowid, samples, the epoch that tells an index to reload fully)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .connection import Connection


class Vectors(Connection):
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

    # -- provisional vectors (recall/recontext.py) ------------------------------------------
    # A fact that store_memory placed is first stored with the vector its placement query
    # already had (its own text), and marked here, in the same transaction; the vector of its
    # text under its parent replaces it later. The marks are `meta` rows, so a crash between
    # the two keeps them: whoever opens the writer next finishes the work.
    _RECONTEXT = "recontext:"

    def mark_recontext(self, fid: str) -> None:
        with self.write():
            self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')",
                              (self._RECONTEXT + fid,))

    def recontext_pending(self, limit: int) -> list[tuple[str, str, str, str | None]]:
        """(id, summary, content, parent's summary) of marked live fragments, oldest first.
        Marks of fragments gone or superseded meanwhile are dropped here."""
        keys = [r[0] for r in self.conn.execute(
            "SELECT key FROM meta WHERE key >= ? AND key < ? ORDER BY rowid LIMIT ?",
            (self._RECONTEXT, self._RECONTEXT[:-1] + ";", limit))]
        ids = [k[len(self._RECONTEXT):] for k in keys]
        rows = {r[0]: (r[0], r[1], r[2], r[3]) for r in self._rows_in(
            "SELECT f.id, f.summary, f.content, (SELECT p.summary FROM edges e JOIN fragments p "
            "ON p.id = e.source WHERE e.target = f.id AND e.kind = 'hierarchical' LIMIT 1) "
            "FROM fragments f "
            "WHERE f.id IN (%s) AND f.superseded_by IS NULL AND f.embedding IS NOT NULL", ids)}
        gone = [k for k, i in zip(keys, ids) if i not in rows]
        if gone:
            with self.write():
                self.conn.executemany("DELETE FROM meta WHERE key = ?", [(k,) for k in gone])
        return [rows[i] for i in ids if i in rows]

    def recontext_count(self) -> int:
        return int(self._one("SELECT count(*) FROM meta WHERE key >= ? AND key < ?",
                             (self._RECONTEXT, self._RECONTEXT[:-1] + ";")) or 0)

    def set_recontexted(self, pairs: Sequence[tuple[str, bytes]]) -> None:
        """The final vectors, and the marks removed, in one transaction. No epoch bump: the
        writer's process patches its index in place (VectorIndex.replace), and a reload
        elsewhere would cost every other reader a full load for a small change of vector."""
        with self.write():
            self.conn.executemany("UPDATE fragments SET embedding = ? WHERE id = ?",
                                  [(b, i) for i, b in pairs])
            self.conn.executemany("DELETE FROM meta WHERE key = ?",
                                  [(self._RECONTEXT + i,) for i, _ in pairs])
