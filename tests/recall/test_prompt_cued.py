"""The cue path (recall/prompt_cued.py, issue 30): a prompt worded like one of a note's cues
gets that note when nothing else passes the gate. A real SQLite file, the real MiniLM model,
the cue vectors filled as the memory service fills them, the server's own selection."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lore_plugin.core.types import Fragment
from lore_plugin.recall import prompt_cued, prompt_judge, prompt_recall
from lore_plugin.recall.cue_vector_fill import fill_cue_vectors
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.prompt_evidence import Candidate
from lore_plugin.recall.storing import store_knowledge

# (summary, content, cues): a front end's notes, as a developer stores them.
NOTES = [
    ("Decision 2026-09-22: Recharts over Chart.js",
     "We picked Recharts over Chart.js for the dashboard because it composes as React "
     "components and supports SSR.",
     "charting library for the frontend\ngraph library decision\nwhy we picked recharts"),
    ("Lumen state: TanStack Query + Zustand, no Redux",
     "Server data goes through TanStack Query; the little client state there is lives in "
     "Zustand stores. Redux was removed in August.",
     "frontend state management\nserver data fetching library\nwhy no redux"),
    ("Lumen forms: react-hook-form with zod schemas",
     "Forms use react-hook-form; validation schemas are zod objects in src/schemas so that "
     "messages stay consistent.",
     "form validation approach\nform library in frontend\nwhere validation schemas live"),
    ("Lumen tests: Vitest + Testing Library, files beside components",
     "Component tests run with Vitest and Testing Library; a test file sits next to its "
     "component as Name.test.tsx.",
     "frontend component tests\njavascript unit test runner\nwhere test files go"),
    ("Lumen icons: lucide-react only",
     "Icons come from lucide-react; react-icons was removed to cut the bundle.",
     "which icon set to use\nadding icons to ui\nicon library choice"),
    ("Lumen routing: TanStack Router, file-based in src/routes",
     "Pages are files under src/routes (TanStack Router); loaders prefetch a page's data.",
     "frontend page routing\nhow routes are defined\nfile based routes"),
]
CHARTS = "what do we use to draw charts in the web app?"


@pytest.fixture()
def memory(isolated_home: Path, embedder, clock):
    mem = Memory(isolated_home / "memory.db", embedder, clock=clock, project="/home/dev/lumen")
    ids = {summary: store_knowledge(mem, content, summary, cues=cues).fragment.id
           for summary, content, cues in NOTES}
    yield mem, ids
    mem.close()


def ask(mem: Memory, prompt: str) -> dict:
    return prompt_recall.answer(mem, {"prompt": prompt, "seen": []}, warm=True)


def test_a_prompt_worded_like_a_cue_gets_its_note_once_the_cues_are_embedded(memory, embedder):
    mem, ids = memory
    charts = ids[NOTES[0][0]]
    assert ask(mem, CHARTS)["ids"] == []  # the note's words and meaning alone fall short
    assert fill_cue_vectors(mem.writer, embedder) == len(NOTES)
    found = {c.fragment.id: c for c in prompt_recall.gather(mem, CHARTS, set()) or []}
    assert found[charts].cue >= prompt_cued.MIN_CUE > found[charts].cosine
    assert ask(mem, CHARTS)["ids"] == [charts]


@pytest.mark.parametrize("prompt", [
    "what's the difference between useMemo and useCallback?",
    "how do I cancel an in-flight fetch request?",
    "why is my CSS grid not filling the full height of the page?",
])
def test_a_prompt_no_note_answers_stays_silent_with_the_cues_embedded(memory, embedder, prompt):
    mem, _ = memory
    fill_cue_vectors(mem.writer, embedder)
    assert ask(mem, prompt)["ids"] == []


def test_cue_vectors_made_from_older_cues_are_not_read(memory, embedder):
    mem, ids = memory
    charts = ids[NOTES[0][0]]
    fill_cue_vectors(mem.writer, embedder)
    mem.writer.update_text(charts, cues="company holiday calendar")
    found = {c.fragment.id: c for c in prompt_recall.gather(mem, CHARTS, set()) or []}
    assert found[charts].cue == 0.0  # due again: nothing read until it is filled anew
    fill_cue_vectors(mem.writer, embedder)
    found = {c.fragment.id: c for c in prompt_recall.gather(mem, CHARTS, set()) or []}
    assert 0.0 < found[charts].cue < prompt_cued.MIN_CUE


def fragment(fid: str) -> Fragment:
    return Fragment(id=fid, content=fid, summary=fid, depth=2, created_at=0.0,
                    last_accessed=0.0, access_count=0, importance=0.5, decay_rate=0.0,
                    last_reinforced=0.0, relevance_score=0.5)


def candidate(fid: str, cue: float, **kw) -> Candidate:
    return Candidate(fragment(fid), cosine=0.3, branch=0.0, below=False, cue=cue, **kw)


def test_the_closest_cue_above_the_bar_answers_alone():
    found = [candidate("a", 0.66), candidate("b", 0.71), candidate("c", 0.40)]
    assert [f.id for f in prompt_cued.answer(found)] == ["b"]
    assert prompt_cued.answer([replace(c, cue=0.64) for c in found]) == []


def test_a_prompt_naming_what_no_note_holds_gets_nothing_by_cue():
    assert prompt_cued.answer([candidate("a", 0.9, stranger=True)]) == []


def test_the_cue_path_speaks_only_when_the_gate_is_silent():
    gate = replace(candidate("gate", 0.0), cosine=0.9, coverage=1.0, own=1.0)
    cued = candidate("cued", 0.95)
    assert [f.id for f in prompt_judge.judge([gate, cued])] == ["gate"]
    assert [f.id for f in prompt_judge.judge([cued])] == ["cued"]
    assert prompt_judge.judge([cued], cued=False, semantic=False) == []
