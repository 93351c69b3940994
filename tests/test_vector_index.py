"""The vector index past REDUCE_FROM: a PCA-reduced candidate pass with an exact re-rank must
find what an exact scan finds, through appends, depth filters and the crossing itself."""

from __future__ import annotations

import numpy as np

from lore_plugin import search
from lore_plugin.store import Store
from lore_plugin.types import NewFragment


def clustered(rng: np.random.Generator, n: int) -> np.ndarray:
    """Vectors around a few hundred centres, like sentence embeddings of a project's notes."""
    centres = rng.standard_normal((300, 384)).astype(np.float32)
    vectors = centres[rng.integers(0, 300, n)] + 0.6 * rng.standard_normal((n, 384)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def fill(store: Store, vectors: np.ndarray, start: int) -> None:
    with store.write():
        for i, vec in enumerate(vectors, start):
            store.insert(NewFragment(content=f"c{i}", summary=f"s{i}", depth=i % 3, id=f"{i:032x}"),
                         now=1.0, embedding=vec.astype("<f4").tobytes())


def exact_top(vectors: np.ndarray, query: np.ndarray, k: int, depths: np.ndarray | None = None,
              depth: int | None = None) -> set[str]:
    sims = vectors @ query
    if depth is not None:
        sims = np.where(depths == depth, sims, -np.inf)
    return {f"{i:032x}" for i in np.argsort(-sims)[:k]}


def test_the_reduced_pass_finds_the_exact_top_results_across_the_threshold(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "REDUCE_FROM", 3000)  # same code path as 20K, a faster test
    rng = np.random.default_rng(7)
    vectors = clustered(rng, 5000)
    store = Store(tmp_path / "m.db")
    fill(store, vectors[:2500], 0)
    index = search.VectorIndex()
    index.refresh(store)
    assert index.basis is None and index.matrix.dtype == np.float32  # small: exact scan
    fill(store, vectors[2500:], 2500)
    index.refresh(store)  # an append that crosses the threshold
    assert index.basis is not None and index.matrix.dtype == np.float16
    assert len(index.ids) == 5000 and index.reduced.shape == (5000, search.REDUCED_DIMS)
    depths = np.arange(5000) % 3
    found = total = 0
    for query in clustered(rng, 20):
        got = {i for i, _ in index.search(query, 20)}
        found += len(got & exact_top(vectors, query, 20))
        got_depth = {i for i, _ in index.search(query, 10, depth=1)}
        found += len(got_depth & exact_top(vectors, query, 10, depths, 1))
        assert all(int(i, 16) % 3 == 1 for i in got_depth)
        total += 30
    assert found / total >= 0.97
    query = vectors[42]
    sims = index.similarities(query, [f"{42:032x}", f"{7:032x}"])
    assert abs(sims[f"{42:032x}"] - 1.0) < 1e-2
    assert abs(sims[f"{7:032x}"] - float(vectors[7] @ query)) < 1e-2


def test_a_full_reload_rebuilds_the_reduced_index_from_the_store(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "REDUCE_FROM", 1000)
    rng = np.random.default_rng(11)
    vectors = clustered(rng, 1500)
    store = Store(tmp_path / "m.db")
    fill(store, vectors, 0)
    index = search.VectorIndex()
    index.refresh(store)
    store.supersede(f"{5:032x}", f"{6:032x}", now=2.0)  # bumps the epoch: a full reload
    index.refresh(store)
    assert len(index.ids) == 1499 and f"{5:032x}" not in index.ids
    assert index.reduced is not None and len(index.reduced) == 1499
    best = index.search(vectors[100], 1)[0]
    assert best[0] == f"{100:032x}" and best[1] > 0.99
