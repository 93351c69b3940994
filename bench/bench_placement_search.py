"""A group commit's placement searches: each query's own pass over the vector index
(VectorIndex.search_many, as before) beside one matrix product for the whole batch
(VectorIndex.search_batch, recall/group_view.BatchIndex), on a real index loaded from a
SQLite file of N synthetic fragments (clustered unit vectors, as in
tests/recall/test_vector_index.py).

    python bench/bench_placement_search.py [--size 100000] [--batch 16] [--rounds 7]

Prints the median milliseconds for one batch's searches either way, over alternating
rounds, and checks that both find the same fragments."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from lore_plugin.core.types import NewFragment
from lore_plugin.recall.memory_base import CANDIDATES
from lore_plugin.recall.search import VectorIndex
from lore_plugin.store import Store


def clustered(rng: np.random.Generator, n: int) -> np.ndarray:
    centres = rng.standard_normal((300, 384)).astype(np.float32)
    vectors = centres[rng.integers(0, 300, n)] + 0.6 * rng.standard_normal((n, 384)).astype(
        np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def build(path: Path, size: int) -> None:
    store = Store(path)
    rng = np.random.default_rng(1)
    for start in range(0, size, 5000):
        vectors = clustered(rng, min(5000, size - start))
        with store.write():
            for i, vec in enumerate(vectors, start):
                store.insert(NewFragment(content=f"c{i}", summary=f"s{i}", depth=i % 3,
                                         id=f"{i:032x}"), now=1.0,
                             embedding=vec.astype("<f4").tobytes())
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--db", type=Path, help="reuse this database (built if missing)")
    args = parser.parse_args()
    path = args.db or Path(tempfile.mkdtemp(prefix="lore-placement-")) / "m.db"
    if not path.exists():
        build(path, args.size)
    store = Store(path, readonly=True)
    index = VectorIndex()
    index.refresh(store)
    queries = clustered(np.random.default_rng(2), args.batch)
    alone_ms, together_ms = [], []
    for round_ in range(args.rounds):
        for way in (("alone", "together") if round_ % 2 == 0 else ("together", "alone")):
            began = time.perf_counter()
            if way == "alone":
                alone = [index.search_many(q, CANDIDATES, None, [None]) for q in queries]
                alone_ms.append((time.perf_counter() - began) * 1000)
            else:
                together = index.search_batch(queries, CANDIDATES, None, [None])
                together_ms.append((time.perf_counter() - began) * 1000)
    same = all([i for i, _ in a[0]] == [i for i, _ in b[0]] for a, b in zip(alone, together))
    print(f"{len(index.ids)} fragments ({'reduced' if index.basis is not None else 'exact'} "
          f"pass), {args.batch} placement queries, median of {args.rounds} alternating rounds, "
          f"load {os.getloadavg()[0]:.1f}: one pass each {statistics.median(alone_ms):.1f} ms, "
          f"one matrix product {statistics.median(together_ms):.1f} ms; same ids: {same}")
    store.close()


if __name__ == "__main__":
    main()
