"""Consolidation fills the cue vectors of the cues it just wrote (llm_round.py), after their
commit, so the per-prompt judge has them before any service runs; a dry run embeds nothing.
A real SQLite file, the real model, the LLM faked at its seam."""

from __future__ import annotations

from lore_plugin.core.cues import cue_list
from lore_plugin.embedding.cue_vectors import closest
from lore_plugin.llm.client import FakeLLM
from tests.consolidation.test_consolidate import cycle
from tests.consolidation.test_cue_writing import ATLAS, ATLAS_CUES, MIGRATE, cuer, notes


def test_cues_written_by_the_cycle_get_their_vectors_in_the_same_run(memory, settings):
    ids = notes(memory, {ATLAS: "", MIGRATE: ""})
    llm = FakeLLM(default=cuer({ATLAS: ATLAS_CUES, MIGRATE: ["alembic upgrade head"]}))
    assert cycle(memory, settings, llm, dry_run=True)["phases"].get("cue_vectors") is None
    report = cycle(memory, settings, llm)
    assert report["cued"] == 2 and report["phases"]["cue_vectors"]["notes"] == 2
    blobs = memory.writer.cue_vectors(list(ids.values()))
    assert set(blobs) == set(ids.values()) and memory.writer.cue_vectors_due(10) == []
    phrase = cue_list(memory.writer.get(ids[ATLAS]).cues)[0]
    assert closest(memory.embedder.embed([phrase])[0], blobs[ids[ATLAS]]) > 0.98
