"""The vectors of a note's cues (core/cues.py), one per phrase, for the per-prompt hook's
judge (issue 30): a question worded unlike its note is often worded like one of the ways
someone would ask for it, and MiniLM rates the question close to that phrase even where it
rates it far from the note (bench/README.md, "Cue vectors").

They are read only for the few candidates a prompt already has, never searched, so they
live in the database, not in the vector index's memory. Each is kept as int8 with a scale
of its own: a unit vector of 384 components rarely has one above 0.3, so 8 bits per
component move a cosine by about 0.002 (tests/embedding/test_cue_vectors.py), and a note's
five cues take 2 KB instead of 7.7 KB.

The blob: k little-endian float32 scales, then k × EMBED_DIM int8 components."""

from __future__ import annotations

from ..core.types import EMBED_DIM

TYPE_CHECKING = False
if TYPE_CHECKING:
    import numpy as np

ROW_BYTES = 4 + EMBED_DIM  # one phrase: its scale and its components


def encode(vectors: np.ndarray) -> bytes:
    """The blob of these unit vectors (one row a phrase)."""
    import numpy as np

    rows = np.asarray(vectors, dtype=np.float32).reshape(-1, EMBED_DIM)
    scales = np.maximum(np.abs(rows).max(axis=1), 1e-12) / 127.0
    quantized = np.clip(np.rint(rows / scales[:, None]), -127, 127).astype(np.int8)
    return scales.astype("<f4").tobytes() + quantized.tobytes()


def decode(blob: bytes) -> np.ndarray:
    """The vectors a blob holds, k × EMBED_DIM float32; a blob of the wrong length is
    refused (ValueError), never misread."""
    import numpy as np

    if not blob or len(blob) % ROW_BYTES:
        raise ValueError(f"a cue vectors blob is a multiple of {ROW_BYTES} bytes, "
                         f"not {len(blob)}")
    k = len(blob) // ROW_BYTES
    scales = np.frombuffer(blob, dtype="<f4", count=k)
    rows = np.frombuffer(blob, dtype=np.int8, offset=4 * k).reshape(k, EMBED_DIM)
    return rows.astype(np.float32) * scales[:, None]


def closest(query: np.ndarray, blob: bytes) -> float:
    """The highest cosine between the (unit) query vector and any of the blob's phrases."""
    return float((decode(blob) @ query).max())
