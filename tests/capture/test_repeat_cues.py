"""A fact extracted again is not stored again, and the cues it came with join the held
fact's (capture/repeats.py), whether it repeats the fact by name or in nearly the same words.
Real transcripts, the real model, a real SQLite file and a space of a real hub."""

from __future__ import annotations

import pytest

from lore_plugin.capture.repeats import Repeats
from lore_plugin.core.types import NewFragment
from lore_plugin.store import Store
from tests.transcripts import TranscriptWriter

HELD = "Deploys happen on Thursday at 09:00 UTC"


def answer(fact: str, cues: list[str]) -> dict:
    """The model's answer: one topic, one concept, one stated fact with its cues."""
    return {"topics": [{"name": "Deploys", "summary": "How releases ship", "importance": "high",
                        "concepts": [{"name": "Deploy window", "summary": "When deploys run",
                                      "importance": "medium",
                                      "facts": [{"summary": fact, "content": fact,
                                                 "importance": "medium", "basis": "stated",
                                                 "cues": cues}]}]}]}


def say(writer: TranscriptWriter, text: str) -> None:
    writer.user(text)
    writer.assistant("Noted.", tool=False)


def facts(settings) -> list[tuple[str, str]]:
    store = Store(settings.db_path)
    try:
        return [(r[0], r[1]) for r in store.execute(
            "SELECT summary, cues FROM fragments WHERE depth = 2 AND superseded_by IS NULL")]
    finally:
        store.close()


def test_a_fact_extracted_again_by_name_joins_its_cues_to_the_held_ones(tmp_path, settings,
                                                                       ingestor, model):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    model.extra = answer(HELD, ["when do we ship", "deploy day"])
    say(writer, "We deploy on Thursdays at 09:00 UTC.")
    assert ingestor.ingest(writer.path).failed is None
    model.extra = answer(HELD.lower(), ["When do we ship", "release day", "api key sk-ant-api03-"
                                        + "L0REfakeL0REfakeL0REfake" * 3])
    say(writer, "Reminder: deploys are Thursday 09:00 UTC.")
    assert ingestor.ingest(writer.path).failed is None
    [(summary, cues)] = facts(settings)  # one fact: the repeat was not stored again
    lines = cues.splitlines()
    assert summary == HELD and lines[:3] == ["when do we ship", "deploy day", "release day"]
    assert len(lines) == 4 and "L0REfake" not in cues and "REDACTED" in lines[3]


def test_a_fact_extracted_again_in_nearly_the_same_words_joins_its_cues(tmp_path, settings,
                                                                       ingestor, model):
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    model.extra = answer(HELD, ["when do we ship"])
    say(writer, "We deploy on Thursdays at 09:00 UTC.")
    assert ingestor.ingest(writer.path).failed is None
    model.extra = answer("Deploys happen Thursday at 09:00 UTC", ["release day"])
    say(writer, "Reminder: deploys are Thursday 09:00 UTC.")
    assert ingestor.ingest(writer.path).failed is None
    assert facts(settings) == [(HELD, "when do we ship\nrelease day")]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_repeat_cues_join_in_either_store_and_skip_a_fragment_gone_meanwhile(backend, tmp_path,
                                                                            request):
    store = (Store(tmp_path / "m.db") if backend == "sqlite"
             else request.getfixturevalue("hub_space"))
    try:
        held = store.insert(NewFragment(HELD, HELD, 2, cues="deploy day"), 1.0)
        gone = store.insert(NewFragment("Gone", "Gone", 2), 1.0)
        repeats = Repeats()
        repeats.add(held, "release day")
        repeats.add(held, "deploy day\nwhen do we ship")
        repeats.add(gone, "anything")
        store.delete(gone, 2.0)
        with store.write():
            assert repeats.join_cues(store) == 1
        assert store.get(held).cues == "deploy day\nrelease day\nwhen do we ship"
        with store.write():
            assert repeats.join_cues(store) == 0  # nothing new the second time
    finally:
        if backend == "sqlite":
            store.close()
