"""Cues in recall: the per-prompt hook finds a note by the words of its cues (keyword
search and keyword coverage alike) and injects the note's own text, never its cues. Real
SQLite file, the real model."""

from __future__ import annotations

import pytest

from lore_plugin.recall import prompt_recall, render
from lore_plugin.recall.memory import Memory

NOTE = ("To run atlas locally use `make dev`; it starts the API on port 8080.",
        "Running atlas locally")
CUES = "boot the stack on my laptop\nwhich command spins everything up\nzebra quickstart"
PROMPT = "how do I boot the whole stack on my laptop?"


@pytest.fixture()
def atlas(db_path, embedder, clock):
    memory = Memory(db_path, embedder, clock=clock, project="/work/atlas")
    topic = memory.store("Work on the atlas service.", "Atlas", depth=0)
    concept = memory.store("How atlas is run and shipped.", "Running atlas", topic.id, 1)
    for content, summary in [("Deploys go out through Argo CD on merge to main.", "Deploys"),
                             ("The fleet gets OS updates on Mondays.", "OS updates"),
                             ("Invoices are kept for seven years.", "Invoice retention")]:
        memory.store(content, summary, concept.id, 2)
    note = memory.store(*NOTE, concept.id, 2, cues=CUES)
    yield memory, note.id
    memory.close()


def test_the_prompt_hook_finds_a_note_by_its_cues_and_injects_only_its_text(atlas):
    """The judged path (the model warm). The hook's words-only fallback judges the line it
    would inject, which holds no cue, so cues do not help it."""
    memory, fid = atlas
    answer = prompt_recall.answer(memory, {"prompt": PROMPT, "seen": []}, warm=True)
    assert fid in answer["ids"]
    assert "make dev" in answer["context"]
    assert not any(cue in answer["context"] for cue in CUES.splitlines()[1:])
    assert "zebra" not in answer["context"]


def test_a_rendered_recall_shows_the_note_and_never_its_cues(atlas):
    memory, fid = atlas
    found = memory.query("zebra quickstart", depth=2, limit=5, reinforce=False)
    assert found.fragments[0].fragment.id == fid
    full = memory.get(fid)
    assert full.cues == CUES
    shown = "\n".join([render.fragment_line(full), render.neighbours_text("Children", [full]),
                       render.recalled(render.fragment_line(full))])
    assert "make dev" in shown
    assert "zebra" not in shown and "laptop" not in shown
