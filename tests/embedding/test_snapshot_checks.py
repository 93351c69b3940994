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
