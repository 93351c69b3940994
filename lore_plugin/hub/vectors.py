"""Vectors in the database: pgvector columns searched by the HNSW index (cosine), so the
memory engine asks the hub for the nearest fragments instead of loading every vector
(recall/search.py's in-memory index is for SQLite).

The space records the embedding model and dimension of its vectors, set by the first
vector written. A client with another model refuses to write vectors into it: vectors of
two models side by side make every cosine meaningless (mem0 #4990 lost data that way)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any

from ..core.types import EMBED_BYTES, EMBED_DIM, Fragment
from ..store.rows import FRAGMENT_NUMBERS, row_to_fragment
from .connection import HubConnection
from .errors import HubAccessDenied, ModelMismatch
from .state import STATE_JOIN, joined

EF_SEARCH = 200  # HNSW candidate list; k is at most a few hundred


def vector_text(blob: bytes) -> str:
    """A stored vector (little-endian float32, as SQLite keeps it) as pgvector's text."""
    if len(blob) != EMBED_BYTES:
        raise ModelMismatch(f"a vector of {len(blob) // 4} dimensions cannot go into a hub "
                            f"space of {EMBED_DIM}-dimension vectors")
    values = array("f")
    values.frombytes(blob)
    return "[" + ",".join(map(repr, values.tolist())) + "]"


def vector_blob(values: Sequence[float]) -> bytes:
    return array("f", values).tobytes()


class Vectors(HubConnection):
    _model_checked = False

    def _vector_param(self, blob: bytes) -> str:
        return vector_text(blob)

    def _claim_model(self) -> None:
        """Inside a write: the space takes this client's model if it has none yet; a space
        of another model refuses (ModelMismatch, the transaction rolls back)."""
        if self._model_checked:
            return
        self._run("UPDATE spaces SET embed_model = %s, embed_dim = %s WHERE name = %s AND "
                  "embed_model IS NULL", (self.model, EMBED_DIM, self.space))
        rows = self._all("SELECT embed_model, embed_dim FROM spaces WHERE name = %s",
                         (self.space,))
        if not rows:  # row-level security hides a space this role was removed from
            raise HubAccessDenied(f"this role is no longer a member of space '{self.space}'")
        model, dim = rows[0]
        if (model, dim) != (self.model, EMBED_DIM):
            raise ModelMismatch(
                f"space '{self.space}' holds vectors of {model} ({dim} dimensions) and this "
                f"Lore embeds with {self.model} ({EMBED_DIM}): it will not write vectors "
                "into it; use the same model on every machine, or another space")
        self._model_checked = True

    def space_model(self) -> tuple[str | None, int | None]:
        """The space's model and dimension; once set it never changes, so it is kept."""
        known = getattr(self, "_space_model", None)
        if known is not None:
            return known  # type: ignore[no-any-return]
        row = self._all("SELECT embed_model, embed_dim FROM spaces WHERE name = %s",
                        (self.space,))
        found = (row[0][0], row[0][1]) if row else (None, None)
        if found[0] is not None:
            self._space_model = found
        return found

    def vector_search(self, query: Any, k: int, depth: int | None = None,
                      window: tuple[float, float] | None = None) -> list[tuple[str, float]]:
        """The k live fragments nearest the query by cosine, best first, as (id, cosine);
        `depth` keeps one level, `window` those created in [start, end)."""
        return [(f.id, cos) for f, cos in self.vector_search_rows(query, k, depth, window)]

    def vector_search_rows(self, query: Any, k: int, depth: int | None = None,
                           window: tuple[float, float] | None = None
                           ) -> list[tuple[Fragment, float]]:
        """vector_search with each fragment as get_many(with_text=False, with_parent=False)
        reads it: the index scan visits those rows anyway, and the engine then needs no
        second round trip for them."""
        if self.space_model()[0] not in (None, self.model):
            return []  # another model's vectors: no cosine against them means anything
        where, params = "", {"s": self.space, "q": _query_text(query), "k": k}
        if depth is not None:
            where += " AND f.depth = %(d)s"
            params["d"] = depth
        if window is not None:
            where += " AND f.created_at >= %(a)s AND f.created_at < %(b)s"
            params["a"], params["b"] = window
        # The state comes from its own table, one primary-key probe per hit (state.py).
        rows = self._all(
            f"SELECT {joined(FRAGMENT_NUMBERS)}, 1 - (f.embedding <=> %(q)s::vector) FROM "
            f"fragments f {STATE_JOIN} WHERE f.space = %(s)s AND f.superseded_by IS NULL AND "
            f"f.embedding IS NOT NULL{where} ORDER BY f.embedding <=> %(q)s::vector "
            "LIMIT %(k)s", params)
        # relaxed_order (connection.py) may hand rows back slightly out of order.
        return sorted(((row_to_fragment(r), float(r[-1])) for r in rows), key=lambda r: -r[1])

    def vector_similarities(self, query: Any, ids: Sequence[str]) -> dict[str, float]:
        """Exact cosine for given fragments; those without a vector are left out."""
        if not ids:
            return {}
        return {r[0]: float(r[1]) for r in self._all(
            "SELECT id, 1 - (embedding <=> %s::vector) FROM fragments WHERE space = %s AND "
            "id = ANY(%s) AND embedding IS NOT NULL", (_query_text(query), self.space, list(ids)))}

    def set_embeddings(self, pairs: Sequence[tuple[str, bytes]]) -> None:
        rows = [(vector_text(b), self.space, i) for i, b in pairs]

        def work() -> None:
            self._claim_model()
            self._many("UPDATE fragments SET embedding = %s::vector WHERE space = %s AND id = %s",
                       rows)
        self._atomic(work)

    def embedding_of(self, fid: str) -> bytes | None:
        rows = self._all("SELECT embedding::real[] FROM fragments WHERE space = %s AND id = %s",
                         (self.space, fid))
        return vector_blob(rows[0][0]) if rows and rows[0][0] is not None else None

    def missing_embeddings(self, limit: int = 256) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self._all(
            "SELECT id, summary || E'\\n' || content FROM fragments WHERE space = %s AND "
            "embedding IS NULL LIMIT %s", (self.space, limit))]

    def clear_embeddings(self, ids: Sequence[str]) -> None:
        self._atomic(lambda: self._run(
            "UPDATE fragments SET embedding = NULL WHERE space = %s AND id = ANY(%s)",
            (self.space, list(ids))))

    def embeddings_between(self, after: int, upto: int) -> Iterator[tuple[int, str, int, bytes]]:
        """(seq, id, depth, vector) of live vectors with after < seq <= upto, for callers
        that copy vectors out (pull); the engine itself searches in the database."""
        for seq, fid, depth, values in self._all(
                "SELECT seq, id, depth, embedding::real[] FROM fragments WHERE space = %s AND "
                "seq > %s AND seq <= %s AND embedding IS NOT NULL AND superseded_by IS NULL "
                "ORDER BY seq", (self.space, after, upto)):
            yield seq, fid, depth, vector_blob(values)


def _query_text(query: Any) -> str:
    """A query vector (numpy float32, or any sequence of floats) as pgvector's text."""
    values = query.tolist() if hasattr(query, "tolist") else list(query)
    return "[" + ",".join(map(repr, values)) + "]"
