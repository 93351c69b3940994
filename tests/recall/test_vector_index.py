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


def _reference(index: search.VectorIndex) -> search.VectorIndex:
    """The same rows as one array each, as the index held them before appends had a tail:
    what every search must still answer, to the last bit."""
    ref = search.VectorIndex()
    ref.ids, ref.rowids, ref.depths = index.ids, index.rowids, index.depths
    ref.scales, ref.basis = index.scales, index.basis
    ref.matrix = search.Rows(np.array(index.matrix.whole()))
    ref.reduced = None if index.reduced is None else search.Rows(np.array(index.reduced.whole()))
    return ref


@pytest.mark.parametrize("size", [800, 3500])
def test_appends_leave_the_mapped_base_alone_and_search_as_one_matrix_would(tmp_path,
                                                                            monkeypatch, size):
    """Issue 27: 200 stores, one row each, after a snapshot. The mapped base stays the very
    same array (no copy of the 100K matrix), the tail's buffer is reallocated only when it
    doubles, and every search answers what one concatenated matrix answers and what a
    brute-force scan of the stored vectors finds."""
    monkeypatch.setattr(search, "REDUCE_FROM", 3000)
    rng = np.random.default_rng(21)
    vectors = clustered(rng, size + 200)
    store = Store(tmp_path / "m.db")
    fill(store, vectors[:size], 0)
    index = search.VectorIndex(snapshot_path(tmp_path / "m.db"))
    index.refresh(store)
    reduced = size > 3000
    if reduced:
        assert index.save_snapshot(store) and _mapped(index.matrix.base)
    base, buffers = index.matrix.base, set()
    for i in range(size, size + 200):
        fill(store, vectors[i:i + 1], i)
        index.refresh(store)
        assert index.matrix.base is base and len(index.matrix) == i + 1
        buffers.add(id(index.matrix._tail))
    assert len(buffers) <= 4  # 64, 128, 256 rows (+ the first append's): doubling, amortised
    if reduced:
        assert _mapped(index.matrix.base) and _mapped(index.reduced.base)
        assert index.reduced.base is not None and len(index.reduced) == size + 200
    ref = _reference(index)
    depths = np.arange(size + 200) % 3
    # The brute-force scan reads the vectors as the index keeps them (int8 and a scale when
    # reduced: float32 ties within the rounding may order the tenth place either way).
    kept = (vectors if not reduced
            else index.matrix.whole().astype(np.float32) * index.scales[:, None])
    for query in clustered(rng, 15):
        for depth in (None, 1):
            got = index.search(query, 10, depth=depth)
            assert got == ref.search(query, 10, depth=depth)
            assert {i for i, _ in got} == exact_top(kept, query, 10, depths, depth)
        asked = [f"{i:032x}" for i in (0, size - 1, size, size + 199)]
        assert index.similarities(query, asked) == ref.similarities(query, asked)
    store.close()


def test_replace_and_snapshot_cover_rows_in_the_tail(tmp_path, monkeypatch):
    """A provisional vector in the appended block is replaced like one in the base, and a
    snapshot written with a tail holds base and tail rows in order, read back whole."""
    monkeypatch.setattr(search, "REDUCE_FROM", 1000)
    monkeypatch.setattr(search, "SNAPSHOT_DRIFT", 0.01)
    rng = np.random.default_rng(22)
    vectors = clustered(rng, 1300)
    store = Store(tmp_path / "m.db")
    fill(store, vectors[:1200], 0)
    index = search.VectorIndex(snapshot_path(tmp_path / "m.db"))
    index.refresh(store)
    assert index.save_snapshot(store)
    fill(store, vectors[1200:], 1200)
    index.refresh(store)
    assert len(index.matrix.tail) == 100 and _mapped(index.matrix.base)
    new = clustered(rng, 2)
    ids = [f"{5:032x}", f"{1250:032x}"]  # one in the base, one in the tail
    assert index.replace(dict(zip(ids, new))) == 2
    for fid, vec in zip(ids, new):
        assert index.similarities(vec, [fid])[fid] > 0.999
        assert index.search(vec, 1)[0][0] == fid
    whole = (index.matrix.whole().copy(), index.reduced.whole().copy(), index.scales.copy())
    assert index.save_snapshot(store)  # 100 appended rows are past a 1 % drift
    snap = vector_snapshot.load(index.snapshot)
    assert snap is not None and len(snap.ids) == 1300
    assert np.array_equal(snap.matrix, whole[0]) and np.array_equal(snap.reduced, whole[1])
    assert np.array_equal(snap.scales, whole[2])
    assert len(index.matrix.tail) == 0 and _mapped(index.matrix.base)  # remapped whole
    store.close()


def test_a_rows_value_taken_before_an_append_keeps_its_rows():
    """search_many takes the arrays under the lock and reads them without it: an append
    must not change what an earlier value holds, even when they share a tail buffer."""
    first = search.Rows(np.zeros((3, 2), dtype=np.float32)).appended(np.ones((1, 2), np.float32))
    second = first.appended(np.full((1, 2), 2.0, dtype=np.float32))
    assert first._tail is second._tail  # room to spare: the buffer is shared, not copied
    assert len(first) == 4 and np.array_equal(first.whole()[-1], [1, 1])
    assert np.array_equal(first @ np.ones(2, np.float32), [0, 0, 0, 2])
    assert np.array_equal(second[np.array([0, 3, 4])], [[0, 0], [1, 1], [2, 2]])
    assert np.array_equal(second[-1], [2, 2])


def test_put_copies_a_read_only_base_only_for_a_row_in_it():
    """A provisional vector replaced in the tail must not copy a read-only 100K base."""
    base = np.zeros((4, 2), dtype=np.float32)
    base.flags.writeable = False
    rows = search.Rows(base).appended(np.ones((2, 2), np.float32))
    rows.put(np.array([5]), np.full((1, 2), 3.0, np.float32))
    assert rows.base is base and np.array_equal(rows[5], [3, 3])
    rows.put(np.array([1, 4]), np.full((2, 2), 7.0, np.float32))
    assert rows.base is not base and np.array_equal(rows[np.array([1, 4])], [[7, 7], [7, 7]])
    assert not base.any()  # the original untouched


@pytest.mark.parametrize("reduced", [False, True])
def test_a_batch_of_queries_finds_what_each_query_finds_alone(tmp_path, monkeypatch, reduced):
    """The group writer's placement searches (search_batch, one matrix product) give each
    query the answer search_many gives it, exact scan or reduced pass, any depth filter."""
    monkeypatch.setattr(search, "REDUCE_FROM", 1000 if reduced else 10_000)
    rng = np.random.default_rng(5)
    store = Store(tmp_path / "m.db")
    fill(store, clustered(rng, 1500), 0)
    index = search.VectorIndex()
    index.refresh(store)
    assert (index.basis is not None) == reduced
    queries = clustered(rng, 9)
    for depth in (None, 1):
        together = index.search_batch(queries, 100, depth, [None])
        assert len(together) == len(queries)
        for query, got in zip(queries, together):
            alone = index.search_many(query, 100, depth, [None])[0]
            assert [i for i, _ in got[0]] == [i for i, _ in alone]
            assert np.allclose([s for _, s in got[0]], [s for _, s in alone], atol=1e-5)
    assert search.VectorIndex().search_batch(queries[:2], 5, None, [None]) == [[[]], [[]]]
