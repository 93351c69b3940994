"""Embedding in batches of similar length under a token budget: the same vectors as one text
at a time, in the caller's order, and no inference call over the budget."""

from __future__ import annotations

import numpy as np

from lore_plugin.embedding import embedder as embedding

LONG = "database connection pooling timeout " * 120  # cut at 256 tokens
TEXTS = [LONG if i % 5 == 0 else "word " * (i % 37 + 1) + f"number {i}" for i in range(70)]


class RecordingSession:
    """The real session, with the shape of every input it was given."""

    def __init__(self, session) -> None:
        self.session, self.shapes = session, []

    def run(self, outputs, feed):
        self.shapes.append(feed["input_ids"].shape)
        return self.session.run(outputs, feed)


def test_each_call_stays_within_the_token_budget_and_the_batch_size(embedder):
    model = embedder._load()
    recorder = RecordingSession(model.session)
    model.session = recorder
    try:
        embedder.embed(TEXTS)
    finally:
        model.session = recorder.session
    assert sum(rows for rows, _ in recorder.shapes) == len(TEXTS)
    for rows, longest in recorder.shapes:
        assert rows <= embedding.BATCH
        assert rows * longest <= embedding.TOKEN_BUDGET or rows == 1
    assert max(longest for _, longest in recorder.shapes) == 256  # the long ones were cut


def test_batched_vectors_are_those_of_each_text_alone_in_the_callers_order(embedder):
    together = embedder.embed(TEXTS)
    alone = np.vstack([embedder.embed([text]) for text in TEXTS])
    assert np.abs(together - alone).max() < 1e-5
