"""Candidate retrieval and scoring: the in-memory vector index, the FTS5 query builder and
the fusion of their scores. The memory semantics on top (time, spreading activation,
relevance, branches) live in memory.py."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.types import EMBED_BYTES, EMBED_DIM
from ..embedding import vector_snapshot
from ..store import Store
from . import vector_math
from .vector_math import Rows, pca_basis, top_rows

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

REDUCE_FROM = 20_000  # below this an exact scan is already fast
REDUCED_DIMS = vector_math.REDUCED_DIMS
PCA_SAMPLE = 4096
LOAD_CHUNK = 512  # rows a step: larger chunks leave their temporaries behind in the heap
RERANK = 1000  # approximate candidates scored exactly; the top 100 are all among them
SNAPSHOT_CHECKS = 64  # rows of a snapshot compared with the database before it is trusted
SNAPSHOT_DRIFT = 0.05  # appended share of rows after which the snapshot is rewritten
class VectorIndex:
    """All live fragment vectors as one normalised float32 matrix (int8 past REDUCE_FROM, see
    below). Appends load only the new tail; deletions, supersessions and backfills bump the
    store's vector epoch and force a full reload (0.5 s at 100K). Large indexes start from a
    snapshot file when it matches the database (embedding/vector_snapshot.py); `save_snapshot` writes
    one."""

    def __init__(self, snapshot: Path | None = None) -> None:
        self.snapshot = snapshot
        self._snapshot_rows: int | None = None  # rows the snapshot on disk covers, if known
        self._lock = threading.Lock()
        self._epoch: tuple[str, int] | None = None
        # Ids as one bytes array: 100K Python strings and a dict over them took ~17 MB.
        self.ids: np.ndarray = _id_array([])
        self.rowids: np.ndarray | None = None
        self.depths: np.ndarray | None = None
        self.matrix: Rows | None = None  # a base and an appended tail (vector_math.Rows)
        self.scales: np.ndarray | None = None  # per-row scales when `matrix` is int8
        self._by_id: tuple[np.ndarray, np.ndarray] | None = None  # (sorted ids, their rows)
        # Large indexes also keep a PCA-reduced copy: a first pass over it picks candidates
        # that the full vectors, kept in int8 with a scale per row, then re-rank (see
        # search_many). int8 takes a quarter of float32's memory (38 MB at 100K) and moves a
        # cosine by about 5e-4.
        self.basis: np.ndarray | None = None
        self.reduced: Rows | None = None
        self._dates: tuple[tuple[str, int], np.ndarray] | None = None  # loaded on first use

    @classmethod
    def appended_after(cls, epoch: tuple[str, int]) -> VectorIndex:
        """An empty index that loads only the rows appended after `epoch` (the store's
        vector_epoch): a group-commit batch's own rows, kept out of the shared index until
        they are committed (group_view.BatchIndex)."""
        import numpy as np

        index = cls()
        index._epoch = epoch
        index.rowids = np.empty(0, dtype=np.int64)
        index.depths = np.empty(0, dtype=np.int16)
        index.matrix = Rows(np.empty((0, EMBED_DIM), dtype=np.float32))
        return index

    def refresh(self, store: Store) -> None:
        import numpy as np

        with self._lock, store.read():  # epoch, count and rows from one snapshot
            epoch, max_rowid = store.vector_epoch()
            if self._epoch is not None and self._epoch == (epoch, max_rowid):
                return
            # A new index, or vectors changed under this one: consolidation rewrites the
            # snapshot when it changes them, and taking it beats reading SQLite (0.1 s vs 0.5).
            if self.snapshot is not None and (self._epoch is None or self._epoch[0] != epoch):
                self._adopt_snapshot(store, epoch, max_rowid)
                if self._epoch == (epoch, max_rowid):
                    return
            full = self._epoch is None or self._epoch[0] != epoch or self.matrix is None
            after = 0 if full else self._epoch[1]  # type: ignore[index]
            expected = store.live_embedded_count(after, max_rowid)
            basis = None if full else self.basis
            if basis is None and expected + (0 if full else len(self.ids)) >= REDUCE_FROM:
                sample = [b for b in store.embedding_sample(PCA_SAMPLE) if len(b) == EMBED_BYTES]
                basis = pca_basis(np.frombuffer(b"".join(sample),
                                                 dtype="<f4").reshape(-1, EMBED_DIM))
            ids, rowids, depths, mat, scales, red = _load_rows(store, after, max_rowid, expected,
                                                               basis)
            rows = len(ids)
            if full:
                self.ids, self.rowids, self.depths, self.matrix = ids, rowids, depths, Rows(mat)
                self.scales, self.basis = scales, basis
                self.reduced = None if red is None else Rows(red)
            elif rows:
                assert self.rowids is not None and self.depths is not None
                assert self.matrix is not None
                if basis is not None and self.basis is None:  # this append crossed REDUCE_FROM
                    old = self.matrix.whole().astype(np.float32)
                    self.reduced = Rows(old @ basis)
                    quantized, self.scales = _quantize(old)
                    self.matrix, self.basis = Rows(quantized), basis
                self.ids = np.concatenate([self.ids, ids])
                self.rowids = np.concatenate([self.rowids, rowids])
                self.depths = np.concatenate([self.depths, depths])
                self.matrix = self.matrix.appended(mat)  # the base is not copied
                if scales is not None and self.scales is not None:
                    self.scales = np.concatenate([self.scales, scales])
                if red is not None and self.reduced is not None:
                    self.reduced = self.reduced.appended(red)
            if full or rows:
                self._by_id = None
            if full:
                self._snapshot_rows = None
            self._epoch = (epoch, max_rowid)

    def _adopt_snapshot(self, store: Store, epoch: str, max_rowid: int) -> None:
        """Takes the snapshot's rows if it is of this database at this epoch: same epoch, a
        covered range the database agrees has as many live vectors, and a spread of rows
        whose ids, depths and vectors match. Rows appended after it load as a normal tail."""
        import numpy as np

        assert self.snapshot is not None
        snap = vector_snapshot.load(self.snapshot, epoch)
        if snap is None or snap.epoch != epoch or snap.max_rowid > max_rowid:
            return
        if store.live_embedded_count(0, snap.max_rowid) != len(snap.ids):
            return
        picks = np.unique(np.linspace(0, len(snap.ids) - 1, SNAPSHOT_CHECKS).astype(int))
        live = store.vectors_at([int(snap.rowids[i]) for i in picks])
        for i in picks:
            row = live.get(int(snap.rowids[i]))
            if row is None or row[0].encode() != snap.ids[i] or row[1] != int(snap.depths[i]):
                return
            if len(row[2]) != EMBED_BYTES:
                return
            vector = np.frombuffer(row[2], dtype="<f4")
            kept = snap.matrix[i].astype(np.float32) * snap.scales[i]
            if float(np.abs(vector - kept).max()) > snap.scales[i]:  # rounding moves half that
                return
        self._take_arrays(snap)
        self._dates = None
        self._epoch = (epoch, snap.max_rowid)
        self._snapshot_rows = len(snap.ids)

    def _take_arrays(self, snap: vector_snapshot.Snapshot) -> None:
        self.ids, self.rowids, self.depths = snap.ids, snap.rowids, snap.depths
        self.matrix, self.reduced = Rows(snap.matrix), Rows(snap.reduced)
        self.scales, self.basis = snap.scales, snap.basis
        self._by_id = None

    def save_snapshot(self, store: Store) -> bool:
        """Writes the snapshot file when the index is large (reduced) and the file is missing
        or behind by more than SNAPSHOT_DRIFT, unless `store` shows that the vectors changed
        meanwhile. Returns whether it wrote one."""
        import numpy as np

        with self._lock:
            if (self.snapshot is None or self._epoch is None or self.basis is None
                    or self.reduced is None or self.matrix is None or self.rowids is None
                    or self.depths is None or self.scales is None):
                return False
            if (self._snapshot_rows is not None
                    and len(self.ids) - self._snapshot_rows <= SNAPSHOT_DRIFT * len(self.ids)):
                return False
            snap = vector_snapshot.Snapshot(
                self._epoch[0], self._epoch[1], self.ids, self.rowids, self.depths,
                self.matrix.base, self.scales, self.basis, self.reduced.base)
            tails = {"matrix": self.matrix.tail, "reduced": self.reduced.tail}
        # Outside the lock: queries go on meanwhile.
        if not vector_snapshot.save(self.snapshot, snap,
                                    lambda: store.vector_epoch()[0] == snap.epoch, tails):
            return False
        # Swap the arrays just written for views of the file: their pages are then shared
        # with the other servers and, for the full vectors, mostly never loaded (see
        # vector_snapshot.load). The file read back must hold the same rows: another server
        # may have renamed its own copy over ours meanwhile.
        mapped = vector_snapshot.load(self.snapshot, snap.epoch)
        with self._lock:
            if self._epoch == (snap.epoch, snap.max_rowid):
                self._snapshot_rows = len(snap.ids)
                if mapped is not None and np.array_equal(self.rowids, mapped.rowids):
                    self._take_arrays(mapped)
        return True

    def search(self, query: np.ndarray, k: int, depth: int | None = None,
               window: tuple[float, float] | None = None) -> list[tuple[str, float]]:
        """The k most similar vectors, best first; `window` keeps only fragments created in
        [start, end) (it needs `load_dates` first)."""
        return self.search_many(query, k, depth, [window])[0]

    def search_many(self, query: np.ndarray, k: int, depth: int | None,
                    windows: list[tuple[float, float] | None]) -> list[list[tuple[str, float]]]:
        """One similarity pass over the matrix, then the top k for each window (None: all)."""
        return self.search_batch(query[None, :], k, depth, windows)[0]

    def search_batch(self, queries: np.ndarray, k: int, depth: int | None,
                     windows: list[tuple[float, float] | None]
                     ) -> list[list[list[tuple[str, float]]]]:
        """search_many for each row of `queries`, the matrix read once for all of them (one
        matrix product: a group commit's placement queries, recall/group_view.py)."""
        import numpy as np

        with self._lock:
            matrix, scales, depths, ids = self.matrix, self.scales, self.depths, self.ids
            dates = self._dates
            basis, reduced = self.basis, self.reduced
        if matrix is None or depths is None or not len(ids):
            return [[[] for _ in windows] for _ in queries]
        exact = basis is None or reduced is None or len(reduced) != len(ids)
        # A pass over 100K x 128 reads a third of the memory of 100K x 384; candidates from
        # it are then scored exactly below. One query keeps its matrix-vector product.
        many = (matrix @ queries.T if exact else reduced @ (queries @ basis).T  # type: ignore[operator]
                ) if len(queries) > 1 else None
        allowed = None if depth is None else depths == depth
        answers: list[list[list[tuple[str, float]]]] = []
        for j, query in enumerate(queries):
            scores = (many[:, j] if many is not None else matrix @ query if exact
                      else reduced @ (query @ basis))  # type: ignore[operator]
            out: list[list[tuple[str, float]]] = []
            for window in windows:
                mask = allowed
                if window is not None:
                    if dates is None or len(dates[1]) != len(ids):
                        out.append([])
                        continue
                    inside = (dates[1] >= window[0]) & (dates[1] < window[1])
                    mask = inside if mask is None else mask & inside
                picked = scores if mask is None else np.where(mask, scores, -np.inf)
                top = top_rows(picked, min(k if exact else max(RERANK, k), len(ids)))
                sims = picked[top] if exact else _full_vectors(matrix, scales, top) @ query
                order = np.argsort(-sims)[:k]
                out.append([(ids[top[i]].decode(), float(sims[i])) for i in order])
            answers.append(out)
        return answers

    def similarities(self, query: np.ndarray, wanted: Iterable[str]) -> dict[str, float]:
        """Exact cosine for given fragments (those without a vector are left out)."""
        import numpy as np

        with self._lock:
            (ordered, order), matrix, scales = self._sorted_ids(), self.matrix, self.scales
        asked = list(wanted)
        if not asked or matrix is None or not len(ordered):
            return {}
        keys = _id_array(asked)
        at = np.minimum(np.searchsorted(ordered, keys), len(ordered) - 1)
        hit = ordered[at] == keys
        if not hit.any():
            return {}
        sims = _full_vectors(matrix, scales, order[at[hit]]) @ query
        return {fid: float(sim) for fid, sim in zip(np.array(asked)[hit].tolist(), sims)}

    def _sorted_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids sorted, their rows), kept until the rows change; called under the lock."""
        import numpy as np

        if self._by_id is None:
            order = np.argsort(self.ids, kind="stable")
            self._by_id = (self.ids[order], order)
        return self._by_id

    def replace(self, vectors: dict[str, np.ndarray]) -> int:
        """Puts new vectors in place for fragments the index holds (recall/recontext.py):
        in place, as the store changed them without an epoch bump. Returns how many."""
        import numpy as np

        with self._lock:
            (ordered, order), asked = self._sorted_ids(), list(vectors)
            if self.matrix is None or not len(ordered) or not asked:
                return 0
            keys = _id_array(asked)
            at = np.minimum(np.searchsorted(ordered, keys), len(ordered) - 1)
            hit = ordered[at] == keys
            rows, new = order[at[hit]], np.stack([vectors[i] for i, h in zip(asked, hit) if h])
            # A snapshot's arrays are copy-on-write maps of its file (vector_snapshot.load):
            # only the pages patched, see Rows.put. Anything read-only is copied whole.
            if self.scales is not None and not self.scales.flags.writeable:
                self.scales = self.scales.copy()
            matrix, scales = self.matrix, self.scales
            assert matrix is not None
            if scales is None:
                matrix.put(rows, new)
            else:
                quantized, scales[rows] = _quantize(new)
                matrix.put(rows, quantized)
            if self.reduced is not None and self.basis is not None:
                self.reduced.put(rows, new @ self.basis)
            return len(rows)

    def load_dates(self, store: Store) -> None:
        """Creation times aligned with the rows, for time-window search. Loaded on the first
        query that names a time (0.2 s at 100K); after appends only the new rows are read."""
        import numpy as np

        with self._lock:
            epoch, rowids, ids, known = self._epoch, self.rowids, self.ids, self._dates
        if epoch is None or rowids is None or (known and known[0] == epoch):
            return
        if known and known[0][0] == epoch[0] and len(rowids) - len(known[1]) <= 2000:
            new = [i.decode() for i in ids[len(known[1]):]]
            tail = store.get_many(new, with_text=False)
            dates = np.concatenate([known[1], np.fromiter(
                (tail[i].created_at if i in tail else np.nan for i in new), dtype=np.float64)])
        else:
            known_rows = np.fromiter(store.creation_times(),
                                     dtype=[("rowid", np.int64), ("at", np.float64)])
            at = np.minimum(np.searchsorted(known_rows["rowid"], rowids),
                            max(len(known_rows) - 1, 0))
            dates = (np.where(known_rows["rowid"][at] == rowids, known_rows["at"][at], np.nan)
                     if len(known_rows) else np.full(len(rowids), np.nan))
        with self._lock:
            if self._epoch == epoch and len(dates) == len(self.ids):
                self._dates = (epoch, dates)


def refresh_snapshot(db_path: Path) -> bool:
    """Brings the database's vector snapshot up to date, e.g. after consolidation changed the
    vectors, so that the next server starts from it rather than from SQLite. Returns whether
    it wrote one (small memories have none: they load fast enough without)."""
    store = Store(db_path, readonly=True)
    try:
        if store.live_embedded_count(0, store.vector_epoch()[1]) < REDUCE_FROM:
            return False
        index = VectorIndex(vector_snapshot.snapshot_path(db_path))
        index.refresh(store)
        return index.save_snapshot(store)
    finally:
        store.close()


def _load_rows(store: Store, after: int, upto: int, expected: int, basis: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None,
                          np.ndarray | None]:
    """Streams live vectors in chunks into preallocated arrays (a list of 100K blobs joined
    at once left ~300 MB of RSS behind). With a basis, full vectors are kept in int8 with
    their scales (they only re-rank a thousand candidates) next to their projection."""
    import numpy as np

    ids: list[str] = []
    rowids = np.empty(expected, dtype=np.int64)
    depths = np.empty(expected, dtype=np.int16)
    mat = np.empty((expected, EMBED_DIM), dtype=np.float32 if basis is None else np.int8)
    scales = None if basis is None else np.empty(expected, dtype=np.float32)
    red = None if basis is None else np.empty((expected, basis.shape[1]), dtype=np.float32)
    cursor, done, wrong = store.embeddings_between(after, upto), 0, 0
    while chunk := list(islice(cursor, LOAD_CHUNK)):
        if any(len(r[3]) != EMBED_BYTES for r in chunk):
            # A vector of another length (an old import, a hand edit) would fail the reshape
            # and with it every search: it is left out, and `lore doctor` reports it.
            kept = [r for r in chunk if len(r[3]) == EMBED_BYTES]
            wrong += len(chunk) - len(kept)
            chunk = kept
        end = done + len(chunk)
        vectors = np.frombuffer(b"".join(r[3] for r in chunk), dtype="<f4").reshape(-1, EMBED_DIM)
        ids.extend(r[1] for r in chunk)
        rowids[done:end] = [r[0] for r in chunk]
        depths[done:end] = [r[2] for r in chunk]
        if scales is None:
            mat[done:end] = vectors
        else:
            mat[done:end], scales[done:end] = _quantize(vectors)
        if red is not None:
            red[done:end] = vectors @ basis
        done = end
    if wrong:
        log.warning("left %d vector(s) of the wrong length out of the index; run `lore doctor "
                    "--fix` to embed those fragments again", wrong)
    return (_id_array(ids), rowids[:done], depths[:done], mat[:done],
            None if scales is None else scales[:done], None if red is None else red[:done])


def _id_array(ids: list[str]) -> np.ndarray:
    """Fixed-width UTF-8 bytes, as wide as the longest id (32 for Lore's own)."""
    import numpy as np

    return np.array([i.encode() for i in ids], dtype="S")


def _quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows as int8 with a scale each (largest component maps to ±127)."""
    import numpy as np

    scales = np.abs(vectors).max(axis=1).astype(np.float32) / 127
    scales[scales == 0] = 1.0
    return np.round(vectors / scales[:, None]).astype(np.int8), scales


def _full_vectors(matrix: Rows, scales: np.ndarray | None, rows: Any) -> np.ndarray:
    """The float32 vectors of some rows, from either kind of matrix."""
    import numpy as np

    picked = matrix[rows].astype(np.float32)
    return picked if scales is None else picked * scales[rows, None]
