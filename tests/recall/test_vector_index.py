"""The vector index past REDUCE_FROM: a PCA-reduced candidate pass with an exact re-rank must
find what an exact scan finds, through appends, depth filters and the crossing itself."""

from __future__ import annotations

import mmap
import os
import subprocess

import numpy as np
import pytest

from lore_plugin.core.types import NewFragment
from lore_plugin.embedding import vector_snapshot
from lore_plugin.embedding.vector_snapshot import snapshot_path
from lore_plugin.recall import search
from lore_plugin.store import Store


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
    assert index.basis is not None and index.matrix.dtype == np.int8
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
    assert index.similarities(query, ["not-an-id", "ünïcode", f"{9999:032x}"]) == {}
    assert set(index.similarities(query, ["zzz", f"{3:032x}"])) == {f"{3:032x}"}


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
    assert len(index.ids) == 1499 and f"{5:032x}".encode() not in index.ids
    assert index.reduced is not None and len(index.reduced) == 1499
    best = index.search(vectors[100], 1)[0]
    assert best[0] == f"{100:032x}" and best[1] > 0.99


def big_index(tmp_path, monkeypatch, n: int = 1500, seed: int = 3):
    """A store past a lowered REDUCE_FROM, its vectors, and an index that has saved a snapshot."""
    monkeypatch.setattr(search, "REDUCE_FROM", 1000)
    vectors = clustered(np.random.default_rng(seed), n)
    store = Store(tmp_path / "m.db")
    fill(store, vectors, 0)
    index = search.VectorIndex(snapshot_path(tmp_path / "m.db"))
    index.refresh(store)
    assert index.save_snapshot(store) and index.snapshot.exists()
    assert not index.save_snapshot(store)  # nothing new to write
    return store, vectors, index


def test_a_new_index_starts_from_the_snapshot_and_loads_only_the_appended_tail(tmp_path, monkeypatch):
    store, vectors, first = big_index(tmp_path, monkeypatch)
    extra = clustered(np.random.default_rng(4), 200)
    fill(store, extra, 1500)
    loaded: list[int] = []
    original = store.embeddings_between
    monkeypatch.setattr(store, "embeddings_between",
                        lambda a, b: loaded.append(a) or original(a, b))
    fresh = search.VectorIndex(first.snapshot)
    fresh.refresh(store)
    assert loaded == [first._epoch[1]]  # only rows after the snapshot came from SQLite
    assert len(fresh.ids) == 1700 and list(fresh.ids[:1500]) == list(first.ids)
    assert fresh.search(vectors[10], 1)[0][0] == f"{10:032x}"
    assert fresh.search(extra[5], 1)[0][0] == f"{1505:032x}"
    assert fresh.save_snapshot(store) is True  # 200 new rows are past the drift allowance


def _mapped(array: np.ndarray) -> bool:
    """Whether the array's memory is a mapping of a file (np.frombuffer over an mmap)."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(getattr(base, "obj", base), mmap.mmap)


def test_snapshot_vectors_are_mapped_from_the_file_not_copied(tmp_path, monkeypatch):
    rng = np.random.default_rng(8)
    monkeypatch.setattr(search, "REDUCE_FROM", 1000)
    vectors = clustered(rng, 1500)
    store = Store(tmp_path / "m.db")
    fill(store, vectors, 0)
    index = search.VectorIndex(snapshot_path(tmp_path / "m.db"))
    index.refresh(store)
    queries = vectors[rng.choice(1500, 20, replace=False)] + rng.normal(0, 0.02, (20, 384)).astype(np.float32)
    before = [index.search(q, 10) for q in queries]
    assert not _mapped(index.matrix.base)  # read from SQLite
    assert index.save_snapshot(store)
    # The server that wrote the file swaps its own copies for views of it; answers stay.
    assert _mapped(index.matrix.base) and _mapped(index.reduced.base)
    assert [index.search(q, 10) for q in queries] == before
    fresh = search.VectorIndex(index.snapshot)
    fresh.refresh(store)
    assert _mapped(fresh.matrix.base) and _mapped(fresh.reduced.base)
    assert [fresh.search(q, 10) for q in queries] == before
    # Rows appended after the mapped ones are searched with them.
    fill(store, clustered(np.random.default_rng(9), 10), 1500)
    fresh.refresh(store)
    assert len(fresh.ids) == 1510 and fresh.search(queries[0], 10)[0] == before[0][0]


def test_a_snapshot_from_another_epoch_or_database_is_ignored(tmp_path, monkeypatch):
    store, vectors, first = big_index(tmp_path, monkeypatch)
    store.supersede(f"{5:032x}", f"{6:032x}", now=2.0)  # bumps the epoch
    fresh = search.VectorIndex(first.snapshot)
    fresh.refresh(store)
    assert fresh._snapshot_rows is None and len(fresh.ids) == 1499
    assert f"{5:032x}".encode() not in fresh.ids

    # Same epoch and row count, other vectors: a copied-in file from another database.
    other = tmp_path / "other"
    other.mkdir()
    other_store, _, _ = big_index(other, monkeypatch, seed=99)
    stranger = Store(tmp_path / "stranger.db")
    fill(stranger, vectors, 0)
    snapshot_path(tmp_path / "stranger.db").write_bytes(snapshot_path(other / "m.db").read_bytes())
    index = search.VectorIndex(snapshot_path(tmp_path / "stranger.db"))
    index.refresh(stranger)
    assert index._snapshot_rows is None
    assert index.search(vectors[42], 1)[0][0] == f"{42:032x}"


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_damaged_snapshot_is_ignored_with_a_warning(tmp_path, monkeypatch, caplog, damage):
    store, vectors, first = big_index(tmp_path, monkeypatch)
    data = first.snapshot.read_bytes()
    first.snapshot.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"\x93NUMPY" + bytes(500),
                                "empty": b""}[damage])
    fresh = search.VectorIndex(first.snapshot)
    fresh.refresh(store)
    assert fresh._snapshot_rows is None and len(fresh.ids) == 1500
    assert "ignoring the vector snapshot" in caplog.text
    assert fresh.save_snapshot(store) and vector_snapshot.load(first.snapshot) is not None


def test_writing_a_snapshot_leaves_no_temporary_files_and_keeps_it_private(tmp_path, monkeypatch):
    gone = subprocess.Popen(["true"])
    gone.wait()  # a writer that died mid-write left its temporary file behind
    (tmp_path / f"m.db-vectors.tmp-{gone.pid}").write_bytes(b"half a snapshot")
    (tmp_path / f"m.db-vectors.tmp-{os.getppid()}").write_bytes(b"a live writer's")
    _, _, index = big_index(tmp_path, monkeypatch)
    assert not (tmp_path / f"m.db-vectors.tmp-{gone.pid}").exists()
    (tmp_path / f"m.db-vectors.tmp-{os.getppid()}").unlink()
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    assert index.snapshot.stat().st_mode & 0o077 == 0
    vector_snapshot.remove(tmp_path / "m.db")
    assert not index.snapshot.exists()


def test_consolidation_style_refresh_rewrites_the_snapshot_only_when_vectors_changed(tmp_path,
                                                                                    monkeypatch):
    monkeypatch.setattr(search, "REDUCE_FROM", 1000)
    store = Store(tmp_path / "m.db")
    fill(store, clustered(np.random.default_rng(5), 800), 0)
    assert search.refresh_snapshot(tmp_path / "m.db") is False  # small: no snapshot at all
    fill(store, clustered(np.random.default_rng(6), 700), 800)
    assert search.refresh_snapshot(tmp_path / "m.db") is True
    assert search.refresh_snapshot(tmp_path / "m.db") is False  # already current
    store.supersede(f"{5:032x}", f"{6:032x}", now=2.0)
    assert search.refresh_snapshot(tmp_path / "m.db") is True
    snap = vector_snapshot.load(snapshot_path(tmp_path / "m.db"))
    assert (snap.epoch, snap.max_rowid) == store.vector_epoch() and len(snap.ids) == 1499


def test_after_vectors_change_a_loaded_index_takes_the_rewritten_snapshot(tmp_path, monkeypatch):
    store, vectors, index = big_index(tmp_path, monkeypatch)
    store.supersede(f"{5:032x}", f"{6:032x}", now=2.0)  # as consolidation does
    assert search.refresh_snapshot(tmp_path / "m.db")  # ... and then rewrites the snapshot
    fill(store, clustered(np.random.default_rng(8), 10), 1500)  # a later append
    loaded: list[int] = []
    original = store.embeddings_between
    monkeypatch.setattr(store, "embeddings_between",
                        lambda a, b: loaded.append(a) or original(a, b))
    index.refresh(store)
    assert index._snapshot_rows == 1499 and len(index.ids) == 1509
    assert loaded and loaded[0] > 0  # only the tail came from SQLite
    assert f"{5:032x}".encode() not in index.ids
    assert index.search(vectors[100], 1)[0][0] == f"{100:032x}"


def test_a_snapshot_of_vectors_that_changed_meanwhile_is_never_left_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(search, "REDUCE_FROM", 1000)
    store = Store(tmp_path / "m.db")
    fill(store, clustered(np.random.default_rng(12), 1200), 0)
    index = search.VectorIndex(snapshot_path(tmp_path / "m.db"))
    index.refresh(store)
    store.supersede(f"{5:032x}", f"{6:032x}", now=2.0)  # e.g. `forget` commits before the write
    assert index.save_snapshot(store) is False and not index.snapshot.exists()

    # The commit lands between the rename and the second look: the writer removes its copy.
    index = search.VectorIndex(snapshot_path(tmp_path / "m.db"))
    index.refresh(store)
    answers = iter([True, False])
    snap = vector_snapshot.Snapshot(index._epoch[0], index._epoch[1], index.ids, index.rowids,
                                    index.depths, index.matrix.whole(), index.scales, index.basis,
                                    index.reduced.whole())
    assert vector_snapshot.save(index.snapshot, snap, lambda: next(answers)) is False
    assert not index.snapshot.exists()
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def test_top_rows_is_exact_with_ties_masks_and_every_size():
    from lore_plugin.recall.vector_math import top_rows

    rng = np.random.default_rng(3)
    for trial in range(200):
        size = int(rng.integers(1, 40_000))
        n = min(size, int(rng.integers(1, 2_000)))
        scores = rng.standard_normal(size).astype(np.float32)
        if trial % 3 == 0:  # a depth or time mask leaves most rows out
            scores[rng.random(size) < 0.8] = -np.inf
        if trial % 4 == 0:  # many equal scores around the threshold
            scores = np.round(scores, 1)
        top = top_rows(scores, n)
        finite = np.sort(scores[np.isfinite(scores)])
        assert len(set(top.tolist())) == len(top)
        assert np.array_equal(np.sort(scores[top]), finite[len(finite) - min(n, len(finite)):])


def test_creation_dates_line_up_with_the_index_rows(tmp_path):
    """Time-window search reads every fragment's creation time once; the index holds only the
    fragments with a vector, so its rows skip some rowids, and each date must land on its own
    row (a query naming a time filters by them)."""
    rng = np.random.default_rng(3)
    store = Store(tmp_path / "m.db")
    with store.write():
        for i in range(60):
            vec = clustered(rng, 1)[0].astype("<f4").tobytes() if i % 4 else None
            store.insert(NewFragment(content=f"c{i}", summary=f"s{i}", depth=1, id=f"{i:032x}",
                                     created_at=1000.0 + i * 86400), now=1.0, embedding=vec)
    index = search.VectorIndex()
    index.refresh(store)
    index.load_dates(store)
    ids = [i.decode() for i in index.ids]
    assert len(ids) == 45 and index._dates is not None
    assert [int(fid, 16) for fid in ids] == [i for i in range(60) if i % 4]
    assert index._dates[1].tolist() == [1000.0 + int(fid, 16) * 86400 for fid in ids]


@pytest.mark.parametrize("size", [500, 3500])
def test_replace_puts_new_vectors_in_place_in_exact_reduced_and_mapped_indexes(tmp_path,
                                                                            monkeypatch, size):
    """recall/recontext.py: a provisional vector replaced without an epoch bump is what the
    index then finds, in the float32 index, the int8 + PCA one, and one mapped from a
    snapshot (read-only pages: patched, they become the index's own copy)."""
    monkeypatch.setattr(search, "REDUCE_FROM", 3000)
    rng = np.random.default_rng(11)
    vectors = clustered(rng, size)
    store = Store(tmp_path / "m.db")
    fill(store, vectors, 0)
    index = search.VectorIndex(snapshot_path(tmp_path / "m.db"))
    index.refresh(store)
    if size > 3000:
        assert index.save_snapshot(store) and _mapped(index.matrix.base)
    before_file = np.array(index.matrix[0])
    new = clustered(rng, 3)
    ids = [f"{i:032x}" for i in (0, 7, size - 1)]
    assert index.replace({**dict(zip(ids, new)), "f" * 32: new[0]}) == 3  # unknown id: skipped
    for fid, vec in zip(ids, new):
        assert index.similarities(vec, [fid])[fid] > 0.999
        assert index.search(vec, 1)[0][0] == fid
    untouched = f"{3:032x}"
    assert index.similarities(vectors[3], [untouched])[untouched] > 0.999
    if size > 3000:  # patched in its copy-on-write pages, not copied whole
        assert _mapped(index.matrix.base) and _mapped(index.reduced.base)
        reread = vector_snapshot.load(index.snapshot)  # the file itself is unchanged
        assert reread is not None and np.array_equal(reread.matrix[0], before_file)
    store.close()
