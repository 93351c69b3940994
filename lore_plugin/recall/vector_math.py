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
