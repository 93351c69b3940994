"""Cue vectors kept as int8 (embedding/cue_vectors.py): what they lose, and what they refuse."""

from __future__ import annotations

import numpy as np
import pytest

from lore_plugin.core.types import EMBED_DIM
from lore_plugin.embedding.cue_vectors import ROW_BYTES, closest, decode, encode


def unit_rows(k: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(k, EMBED_DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_cosines_survive_the_int8_blob_within_a_hundredth(embedder):
    phrases = ["start backend on my machine", "how do I run the API locally",
               "local dev server port", "docker compose up for development"]
    vectors = embedder.embed(phrases)
    blob = encode(vectors)
    assert len(blob) == len(phrases) * ROW_BYTES
    query = embedder.embed(["how do I get the backend running on my laptop?"])[0]
    exact = float((vectors @ query).max())
    assert abs(closest(query, blob) - exact) < 0.01
    assert np.allclose(decode(blob) @ query, vectors @ query, atol=0.01)


def test_the_closest_phrase_decides():
    rows = unit_rows(3, 1)
    assert closest(rows[2], encode(rows)) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("blob", [b"", b"\x00" * (ROW_BYTES - 1), b"\x00" * (ROW_BYTES + 3)])
def test_a_blob_of_the_wrong_length_is_refused(blob):
    with pytest.raises(ValueError):
        decode(blob)
