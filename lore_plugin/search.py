"""Candidate retrieval: the in-memory vector index and the FTS5 query builder.
Fusion and the memory semantics on top live in memory.py."""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING

from .store import Store

if TYPE_CHECKING:
    import numpy as np

_WORD = re.compile(r"[^\W_][\w'.\-]*[^\W_]|[^\W_]", re.UNICODE)
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves know tell remember
recall anything something did does ever
""".split())


def keyword_terms(text: str) -> list[str]:
    terms, seen = [], set()
    for raw in _WORD.findall(text):
        word = raw.strip("'.-").lower()
        if not word or word in STOPWORDS or word in seen:
            continue
        seen.add(word)
        terms.append(word)
    return terms[:32]


def fts_expression(text: str) -> str | None:
    """An OR of quoted terms. Quoting keeps identifiers like ERR_7731 or v2.1 as phrases and
    makes any user text safe to hand to MATCH."""
    terms = keyword_terms(text)
    if not terms:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class VectorIndex:
    """All live fragment vectors as one normalised float32 matrix. Appends load only the new
    tail; deletions, supersessions and backfills bump the store's vector epoch and force a
    full reload (0.2 s at 100K)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._epoch: tuple[str, int] | None = None
        self.ids: list[str] = []
        self.depths: np.ndarray | None = None
        self.matrix: np.ndarray | None = None

    def refresh(self, store: Store) -> None:
        import numpy as np

        epoch, max_rowid = store.vector_epoch()
        with self._lock:
            if self._epoch is not None and self._epoch == (epoch, max_rowid):
                return
            full = self._epoch is None or self._epoch[0] != epoch
            after = 0 if full else self._epoch[1]  # type: ignore[index]
            rows = store.embeddings_since(after)
            ids = [r[1] for r in rows]
            depths = np.fromiter((r[2] for r in rows), dtype=np.int16, count=len(rows))
            mat = (np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(-1, 384)
                   if rows else np.zeros((0, 384), dtype=np.float32))
            if full or self.matrix is None or self.depths is None:
                self.ids, self.depths, self.matrix = ids, depths, mat
            elif rows:
                self.ids = self.ids + ids
                self.depths = np.concatenate([self.depths, depths])
                self.matrix = np.vstack([self.matrix, mat])
            self._epoch = (epoch, max_rowid)

    def search(self, query: np.ndarray, k: int, depth: int | None = None
               ) -> list[tuple[str, float]]:
        import numpy as np

        with self._lock:
            matrix, depths, ids = self.matrix, self.depths, self.ids
        if matrix is None or depths is None or not len(ids):
            return []
        sims = matrix @ query
        if depth is not None:
            sims = np.where(depths == depth, sims, -2.0)
        k = min(k, len(ids))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top])]
        return [(ids[i], float(sims[i])) for i in top if sims[i] > -2.0]
