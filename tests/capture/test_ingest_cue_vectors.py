"""The ingestion worker fills the cue vectors of the facts its batches stored with cues
(worker/run.py), after their commit and outside the transcript's lock. The fake API on
127.0.0.1 extracts the rules a turn states, each with cues; the real model and SQLite file."""

from __future__ import annotations

from lore_plugin.embedding.cue_vectors import decode
from lore_plugin.store import Store
from lore_plugin.worker.run import Worker
from tests.transcripts import TranscriptWriter


def test_facts_ingested_with_cues_get_their_cue_vectors(tmp_path, settings, ingestor, model):
    model.cues = True
    writer = TranscriptWriter(tmp_path / "proj" / "sess.jsonl")
    writer.exchange(4)
    worker = Worker(settings)
    worker._ingestor = ingestor
    assert worker.ingest(writer.path, writer.session)["fragments"]
    store = Store(settings.db_path, readonly=True)
    try:
        cued = [r[0] for r in store.execute("SELECT id FROM fragments WHERE cues != ''")]
        blobs = store.cue_vectors(cued)
        assert cued and set(blobs) == set(cued) and store.cue_vectors_due(10) == []
    finally:
        store.close()
    assert all(decode(b).shape[0] >= 2 for b in blobs.values())
