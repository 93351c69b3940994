"""fusion.idf when a term's count runs ahead of the row count it is weighed against (the
hub caches its row count for a minute while term counts are fresh)."""

from __future__ import annotations

import math

from lore_plugin.recall.fusion import idf


def test_idf_of_a_term_held_by_more_rows_than_counted_is_the_floor_not_an_error():
    assert idf(5, 1) == idf(5, 5) == 1e-6
    assert idf(1, 100) == math.log(99.5 / 1.5)
    assert idf(3, 0) == 1e-6  # an empty index weighs nothing
