"""The vector index's arithmetic, apart from its bookkeeping (search.py): picking the top
rows of a score array, and the PCA basis of the reduced copy."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

REDUCED_DIMS = 128


def top_rows(scores: np.ndarray, n: int) -> np.ndarray:
    """The rows of the n highest finite scores, unordered. A partition of 100K scores takes
    ~1 ms; a threshold from a 1/16 sample first cuts them to ~2n, and the result is exact
    whenever at least n pass it (otherwise all rows are partitioned)."""
    import numpy as np

    rows = None
    if len(scores) >= 16 * n:
        sample = scores[::16]
        kth = min(len(sample) - 1, 2 * n // 16)
        threshold = np.partition(sample, len(sample) - 1 - kth)[len(sample) - 1 - kth]
        if np.isfinite(threshold):
            above = np.flatnonzero(scores >= threshold)
            if len(above) >= n:
                rows = above
    if rows is None:
        rows = np.arange(len(scores))
    top = rows[np.argpartition(-scores[rows], n - 1)[:n]] if len(rows) > n else rows
    return top[np.isfinite(scores[top])]


def pca_basis(matrix: np.ndarray) -> np.ndarray:
    """The REDUCED_DIMS directions that carry most of a sample's energy (uncentred, so inner
    products are what is preserved)."""
    import numpy as np

    _, _, vt = np.linalg.svd(matrix.astype(np.float32), full_matrices=False)
    return np.ascontiguousarray(vt[:REDUCED_DIMS].T, dtype=np.float32)


TAIL_START = 64  # rows of a tail block's first allocation; it doubles when full


class Rows:
    """A matrix as a read-only base (often a copy-on-write map of the snapshot file) and a
    tail block that appended rows go into. Appending never copies the base: at 100K rows a
    `vstack` made the mapped, mostly unread int8 matrix and its reduced copy resident (~95 MB)
    on the first store. The tail has spare capacity that doubles when full, so n appends copy
    O(n) rows in all. A value is never changed by an append (`appended` returns a new one
    sharing the buffers, and writes only past every older value's end), so a search that took
    one under the index's lock reads consistent rows without it."""

    def __init__(self, base: np.ndarray, tail: np.ndarray | None = None, used: int = 0) -> None:
        import numpy as np

        self.base = base
        self._tail = tail if tail is not None else np.empty((0,) + base.shape[1:], base.dtype)
        self._used = used
        self.dtype = base.dtype
        self.shape = (len(base) + used,) + base.shape[1:]

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def tail(self) -> np.ndarray:
        return self._tail[:self._used]

    def appended(self, new: np.ndarray) -> Rows:
        import numpy as np

        end = self._used + len(new)
        tail = self._tail
        if end > len(tail):
            tail = np.empty((max(2 * end, TAIL_START),) + self.base.shape[1:], self.dtype)
            tail[:self._used] = self._tail[:self._used]
        tail[self._used:end] = new
        return Rows(self.base, tail, end)

    def whole(self) -> np.ndarray:
        """One array of every row (a copy when there is a tail)."""
        import numpy as np

        return self.base if not self._used else np.concatenate([self.base, self.tail])

    def __matmul__(self, other: np.ndarray) -> np.ndarray:
        import numpy as np

        if not self._used:
            return self.base @ other
        return np.concatenate([self.base @ other, self.tail @ other])

    def __getitem__(self, rows: object) -> np.ndarray:
        """The given rows (an index array or one int), gathered from both parts."""
        import numpy as np

        at = np.asarray(rows)
        if at.ndim == 0:
            i = int(at) % len(self)
            return self.base[i] if i < len(self.base) else self._tail[i - len(self.base)]
        in_base = at < len(self.base)
        out = np.empty((len(at),) + self.base.shape[1:], self.dtype)
        out[in_base] = self.base[at[in_base]]
        out[~in_base] = self._tail[at[~in_base] - len(self.base)]
        return out

    def put(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Writes rows in place. A copy-on-write map copies only the pages written; a
        read-only base is copied whole first."""
        in_base = rows < len(self.base)
        if in_base.any():  # even an empty write into a read-only array raises
            if not self.base.flags.writeable:
                self.base = self.base.copy()
            self.base[rows[in_base]] = values[in_base]
        self._tail[rows[~in_base] - len(self.base)] = values[~in_base]
