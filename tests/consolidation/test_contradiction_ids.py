"""Issue 24 §3: consolidation's contradiction phase sees each fact's basis and source, keeps
the fact the model names as current (not merely the later one), never lets a guess replace
what the user stated, and journals every supersession so it can be undone."""

from __future__ import annotations

import re

from lore_plugin.consolidation.cycle import consolidate
from lore_plugin.core.config import Settings
from lore_plugin.llm.client import FakeLLM
from lore_plugin.maintenance.curation import Curator
from lore_plugin.recall.memory import Memory


def judge(current_of: str):
    """A model that pairs the two facts of the group and names the one holding `current_of`."""

    def answer(*, system, prompt, tool, max_tokens):
        ids = dict(re.findall(r"^(f\d+) \([^)]*\): (.*)$", prompt, re.MULTILINE))
        (a, b) = ids
        current = next(i for i, text in ids.items() if current_of in text)
        return {"contradictions": [{"a": a, "b": b, "current": current, "reason": "port"}]}

    return answer


def gateway(memory: Memory, clock, old_basis: str, new_basis: str) -> tuple[str, str]:
    store = memory.writer
    tid = memory.store("Service ports", "Service ports", depth=0).id
    cid = memory.store("API gateway", "API gateway", parent_id=tid, depth=1).id
    old = memory.store("The API gateway listens on port 8080", "gateway on 8080", cid, 2).id
    clock.advance(days=30)
    new = memory.store("The API gateway moved to port 9090", "gateway on 9090", cid, 2).id
    for fid, basis in ((old, old_basis), (new, new_basis)):
        store.execute("UPDATE fragments SET basis = ? WHERE id = ?", (basis, fid))
    return old, new


def settings_for(tmp_path) -> Settings:
    return Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home")


def test_the_fact_the_model_names_as_current_stays_even_when_it_is_the_older(
        memory, clock, tmp_path):
    old, new = gateway(memory, clock, "observed", "observed")
    llm = FakeLLM([judge("8080")])  # the later fact was the mistake
    report = consolidate(settings_for(tmp_path), memory.writer, memory.clock, llm, memory.embedder)
    assert report["contradictions"] == 1
    assert memory.writer.get(new).superseded_by == old and memory.writer.get(old).superseded_by is None
    prompt = llm.calls[0]["prompt"]
    assert re.search(r"\(\d{4}-\d\d-\d\d; observed, from agent\): gateway on 8080", prompt)
    curator = Curator(memory)
    (entry,) = [e for e in curator.history() if e.action == "supersede"]
    assert entry.undoable and entry.label.startswith("consolidation replaced")  # after the run
    curator.undo(entry.id)
    assert memory.writer.get(new).superseded_by is None


def test_a_guess_never_replaces_a_stated_fact_in_consolidation_it_is_flagged(
        memory, clock, tmp_path):
    old, new = gateway(memory, clock, "stated", "inferred")
    llm = FakeLLM([judge("9090")])
    report = consolidate(settings_for(tmp_path), memory.writer, memory.clock, llm, memory.embedder)
    assert report["contradictions"] == 0
    assert memory.writer.get(old).superseded_by is None
    assert memory.writer.get(new).metadata["review"]["contradicts"] == old


def test_a_pair_without_a_current_id_the_model_named_changes_nothing(memory, clock, tmp_path):
    old, new = gateway(memory, clock, "observed", "observed")

    def vague(*, system, prompt, tool, max_tokens):
        ids = re.findall(r"^(f\d+) ", prompt, re.MULTILINE)
        return {"contradictions": [{"a": ids[0], "b": ids[1], "current": "f99"}]}

    consolidate(settings_for(tmp_path), memory.writer, memory.clock, FakeLLM([vague]),
                memory.embedder)
    assert memory.writer.get(old).superseded_by is None
    assert memory.writer.get(new).superseded_by is None


def test_a_topic_merge_made_by_consolidation_can_be_undone_until_the_next_one(
        memory, clock, tmp_path):
    older = memory.store("Rust async programming", "Rust async programming", depth=0,
                         cues="tokio").id
    tokio = memory.store("tokio runtime", "tokio runtime", parent_id=older, depth=1).id
    clock.advance(days=3)
    newer = memory.store("Async programming in Rust", "Async programming in Rust", depth=0,
                         cues="await syntax\nTokio").id
    traits = memory.store("async traits", "async traits", parent_id=newer, depth=1).id
    clock.advance(days=1)
    settings = settings_for(tmp_path)
    assert consolidate(settings, memory.writer, memory.clock, None,
                       memory.embedder)["topics_merged"] == 1
    store = memory.writer
    assert store.get(newer).superseded_by == older and store.parent_id(traits) == older
    assert store.get(older).cues == "tokio\nawait syntax"  # the victim's joined on
    store.update_text(older, cues="tokio\nawait syntax\nexecutors")  # given since
    curator = Curator(memory)
    (entry,) = [e for e in curator.history() if e.action == "merge"]
    assert entry.undoable and entry.label.startswith("consolidation merged")
    curator.undo(entry.id)
    assert store.get(newer).superseded_by is None and store.parent_id(traits) == newer
    assert store.get(older).cues == "tokio\nexecutors"  # the victim's went back with it
    assert store.get(newer).cues == "await syntax\nTokio"
    assert store.parent_id(tokio) == older
