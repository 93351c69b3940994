"""Search ranks a candidate by the closer of its own vector and its closest cue phrase
(recall/cue_closeness.py, issue 30). A real SQLite file and the real MiniLM model."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.recall.cue_closeness import cue_closeness
from lore_plugin.recall.cue_vector_fill import fill_cue_vectors
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.storing import store_knowledge

CHARTS = "Decision 2026-09-22: Recharts over Chart.js"
LAYOUT = "Dashboard page layout: filters on top, two columns"
NOTES = [
    (CHARTS, "We picked Recharts over Chart.js because it composes as React components.",
     "charting library for the frontend\ndrawing graphs in the web app"),
    (LAYOUT, "The dashboard page shows its filters on top and the widgets in two columns; "
     "the web app keeps it responsive.", "dashboard layout\nwhere filters go"),
    ("Lumen icons: lucide-react only", "Icons come from lucide-react; react-icons was removed.",
     "which icon set to use"),
    ("Web app theme: dark mode stored in localStorage",
     "The web app remembers the user's theme in localStorage.", "night theme toggle"),
]
ASKED = "how are graphs drawn on the dashboard?"


@pytest.fixture()
def memory(isolated_home: Path, embedder, clock):
    mem = Memory(isolated_home / "memory.db", embedder, clock=clock, project="/home/dev/lumen")
    for summary, content, cues in NOTES:
        store_knowledge(mem, content, summary, cues=cues)
    yield mem
    mem.close()


def first(mem: Memory, text: str) -> list[str]:
    return [s.fragment.summary for s in mem.search(text, limit=2, depth=2).fragments]


def test_a_question_worded_like_a_cue_ranks_its_note_first_once_the_cues_are_embedded(
        memory, embedder):
    assert first(memory, ASKED) == [LAYOUT, CHARTS]  # the words "dashboard" lead it astray
    fill_cue_vectors(memory.writer, embedder)
    assert first(memory, ASKED) == [CHARTS, LAYOUT]


def test_the_similarity_reported_stays_the_notes_own_cosine(memory, embedder):
    before = {s.fragment.summary: s.similarity for s in memory.search(ASKED, depth=2).fragments}
    fill_cue_vectors(memory.writer, embedder)
    after = {s.fragment.summary: s.similarity for s in memory.search(ASKED, depth=2).fragments}
    assert after[CHARTS] == pytest.approx(before[CHARTS])


def test_an_unreadable_blob_counts_as_no_cues(memory, embedder):
    fill_cue_vectors(memory.writer, embedder)
    with memory.writer.write():
        memory.writer.conn.execute("UPDATE cue_vectors SET vectors = x'00ff'")
    assert first(memory, ASKED) == [LAYOUT, CHARTS]
    qvec = memory.embed_one(ASKED)
    ids = list(memory.writer.cue_vectors([s.fragment.id for s in
                                          memory.search(ASKED, depth=2).fragments]))
    assert cue_closeness(memory.reader, qvec, {"x": 0.5}, ids) == {"x": 0.5}
