"""The blind "new user" set of the per-prompt benchmark (bench/data/newuser.json): its ids and
answers hang together, and the benchmark stores each note as that user's session did, in its
own project and on its own day, through store_memory's path (real model, real SQLite)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from datetime import UTC, datetime

from lore_plugin.embedding.embedder import LocalEmbedder
from lore_plugin.recall.memory import Memory
from tests.conftest import ROOT, bench_recall

ATLAS, LUMEN = "/home/dev/atlas", "/home/dev/lumen"


def prompt_cases():
    """bench/prompt_cases.py (bench/ is not a package), after bench_recall, which it imports."""
    bench_recall()
    if "prompt_cases" not in sys.modules:
        spec = importlib.util.spec_from_file_location("prompt_cases",
                                                      ROOT / "bench" / "prompt_cases.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["prompt_cases"] = module
        spec.loader.exec_module(module)
    return sys.modules["prompt_cases"]


def test_the_newuser_set_hangs_together():
    newuser = bench_recall().newuser
    data = newuser.load()
    assert (len(data["notes"]), len(data["related"]), len(data["unrelated"])) == (120, 80, 60)
    assert {q["kind"] for q in data["related"]} == set(newuser.KINDS)
    assert {n["project"] for n in data["notes"]} == {ATLAS, LUMEN, None}
    assert newuser.problems(data) == []


def test_a_newuser_set_breaking_its_rules_is_reported():
    newuser = bench_recall().newuser
    note = {"project": None, "summary": "Shell is fish", "content": "The user's shell is fish.",
            "date": "2026-09-01"}
    data = {"notes": [{"id": "n1", **note}, {"id": "n1", **note, "date": "1 Sep"}],
            "related": [{"id": "q1", "prompt": "which shell?", "answer": "n9", "kind": "direct"},
                        {"id": "q2", "prompt": "my shell?", "answer": "n1", "kind": "guess"}],
            "unrelated": [{"id": "u1", "prompt": "which shell?"}]}
    found = "\n".join(newuser.problems(data))
    assert "notes: id n1 used twice" in found
    assert "its answer n9 is no note" in found
    assert "kind 'guess'" in found
    assert "date '1 Sep'" in found
    assert "asked twice: 'which shell?'" in found


def test_each_prompt_is_asked_from_its_answers_project_and_the_unrelated_from_both():
    bench = bench_recall()
    data = bench.newuser.load()
    asked = bench.newuser.asked_from(data)
    project = {n["id"]: n["project"] for n in data["notes"]}
    assert all(asked[q["prompt"]] == project[q["answer"]] for q in data["related"])
    unrelated = [asked[q["prompt"]] for q in data["unrelated"]]
    assert unrelated.count(ATLAS) == unrelated.count(LUMEN) == 30


def test_the_notes_are_stored_in_their_own_project_on_their_own_day(embedder: LocalEmbedder,
                                                                     tmp_path):
    bench, pc = bench_recall(), prompt_cases()
    corpus = bench.load_newuser()
    by_project = {}
    for node in corpus.nodes:  # the first of each project, and of the general notes
        by_project.setdefault(corpus.meta["projects"][node.key], node)
    few = replace(corpus, nodes=list(by_project.values()))
    cache = bench.CachedEmbedder(embedder, tmp_path / "embeddings.sqlite")
    ids = pc.store_placed(few, tmp_path / "m.db", cache, projects=corpus.meta["projects"])
    assert sorted(ids.values()) == sorted(n.key for n in few.nodes)
    memory = Memory(tmp_path / "m.db", None)
    try:
        for fid, key in ids.items():
            stored = memory.get(fid)
            note = next(n for n in few.nodes if n.key == key)
            assert stored.project == corpus.meta["projects"][key]
            assert datetime.fromtimestamp(stored.created_at, UTC).date() == \
                datetime.fromtimestamp(note.created_at, UTC).date()
    finally:
        memory.close()
