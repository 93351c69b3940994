"""The vector snapshot's check of its float arrays goes through them in chunks (one mask of
the whole reduced copy was 12.8 MB at 100K, at the service's peak) and still sees every row."""

from __future__ import annotations

import numpy as np
import pytest

from lore_plugin.embedding import vector_snapshot
from lore_plugin.recall import search
from tests.recall.test_vector_index import big_index


@pytest.mark.parametrize("row", [0, 700, -1])  # the first chunk, a middle one, the last (partial)
def test_a_value_that_is_not_finite_in_any_chunk_makes_the_snapshot_ignored(
        tmp_path, monkeypatch, caplog, row):
    store, vectors, first = big_index(tmp_path, monkeypatch)  # 1,500 rows
    monkeypatch.setattr(vector_snapshot, "FINITE_CHUNK", 64)  # 1,500 = 23 chunks and 28 rows
    snap = vector_snapshot.load(first.snapshot)
    assert snap is not None
    snap.reduced = snap.reduced.copy()
    snap.reduced[row, 5] = np.nan
    assert vector_snapshot.save(first.snapshot, snap, lambda: True)
    assert vector_snapshot.load(first.snapshot) is None
    assert "reduced holds values that are not finite" in caplog.text
    fresh = search.VectorIndex(first.snapshot)
    fresh.refresh(store)  # from SQLite instead, with the right answers
    assert fresh._snapshot_rows is None
    assert fresh.search(vectors[42], 1)[0][0] == f"{42:032x}"


def test_a_whole_snapshot_still_loads(tmp_path, monkeypatch):
    _, _, first = big_index(tmp_path, monkeypatch)
    monkeypatch.setattr(vector_snapshot, "FINITE_CHUNK", 64)
    assert vector_snapshot.load(first.snapshot) is not None


def mapped_rss_kb(path) -> int:
    """This process's resident KB of its mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:
            inside = len(head) > 5 and head[5] == str(path)
        elif inside and head[0] == "Rss:":
            total += int(head[1])
    return total


def test_loading_checks_the_floats_without_making_the_mapping_resident(tmp_path, monkeypatch):
    """The check reads the file: through the mapping it made the whole reduced copy resident
    at once (49 MB at 100K), the service's peak when it swaps SQLite's arrays for the file."""
    _, _, first = big_index(tmp_path, monkeypatch, n=6000)
    snap = vector_snapshot.load(first.snapshot)
    assert snap is not None
    reduced_kb = snap.reduced.nbytes // 1024  # 3 MB
    assert mapped_rss_kb(first.snapshot.resolve()) < reduced_kb // 3
    assert float(snap.reduced.sum()) != 0  # a query reads them: now they are in
    assert mapped_rss_kb(first.snapshot.resolve()) >= reduced_kb
