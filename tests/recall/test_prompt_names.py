"""A prompt that is little more than names (recall/prompt_names.py, issue 30): the notes that
hold them, when the meaning cannot say so. A real SQLite file, the real MiniLM model, the
server's own selection (prompt_recall.answer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.recall import prompt_judge, prompt_recall
from lore_plugin.recall.memory import Memory
from tests.conftest import note_adder

GRADLE = "Gradle build failures fixed"
DASHBOARD = "Grafana dashboard for the pipeline's latency"

# Long notes on a data team's work: two of them name Priya Raman among much else, so MiniLM
# rates them far from a prompt of her name and a word.
NOTES = [
    ("Helped Priya Raman troubleshoot Gradle build failures: the analytics service's build broke "
     "after the JDK upgrade because the shadow plugin pinned an old ASM version; bumping the "
     "plugin and clearing the daemon cache fixed it for the whole team.", GRADLE),
    ("Slack discussion with Priya Raman about a Grafana dashboard for the pipeline's latency: "
     "panels for the p50 and p95 of each stage, an alert when the nightly load runs late, and "
     "the Loki query behind the error panel.", DASHBOARD),
    ("Deployed the new Spark job for the materialization pipeline; it reads the orders table, "
     "joins the restaurant dimension and writes daily partitions to the lake.",
     "Spark job for materialization deployed"),
    ("Investigated slow queries in the reporting service: a missing index on the orders "
     "table's created_at column made the weekly report scan the whole table.",
     "Slow reporting queries traced to a missing index"),
    ("Set up the work log template for the team: each entry names the project, the day, what "
     "was done and what is blocked, so that stand-ups can be skipped on quiet days.",
     "Work log template for the team"),
    ("Reviewed the work on the dbt models for restaurant metrics: tests for null keys, a "
     "freshness check on the source and documentation for each column.",
     "Reviewed the dbt models' work"),
    ("Work on the VPN: the office VPN dropped long-running log searches, so the searches now "
     "run from a bastion inside the network.", "VPN work for log searches"),
    ("Onboarding to the analytics codebase: where the jobs live, how they are scheduled by "
     "Airflow, and who owns which pipeline.", "Onboarding to the analytics codebase"),
    ("Quarterly planning lists the team's projects with an owner and a target date for each.",
     "Quarterly planning"),
]


@pytest.fixture()
def memory(isolated_home: Path, embedder, clock):
    mem = Memory(isolated_home / "memory.db", embedder, clock=clock)
    ids: dict[str, str] = {}
    add = note_adder(mem, ids)
    topic = add("The data team's work on the analytics pipeline", "Analytics work", None, 0)
    notes = add("What was done, by whom", "Work notes", topic, 1)
    for text, summary in NOTES:
        add(text, summary, notes, 2)
    yield mem, ids
    mem.close()


def ask(mem: Memory, prompt: str) -> list[str]:
    return prompt_recall.answer(mem, {"prompt": prompt, "seen": []}, warm=True)["ids"]


def test_a_prompt_of_names_gets_the_notes_that_hold_them(memory):
    """"work" is common here (several notes hold it); the two rare names are held by two
    notes only: those are the answers, though the gate alone stays silent."""
    mem, ids = memory
    found = prompt_recall.gather(mem, "Priya Raman work", set())
    assert prompt_judge.judge(found, names=False) == []
    assert set(ask(mem, "Priya Raman work")) == {ids[GRADLE], ids[DASHBOARD]}


def test_a_name_no_note_holds_gets_nothing(memory):
    """Priya Raman is known here, Chen is not: the prompt asks about someone this memory never
    met, and the notes naming Priya Raman do not answer it."""
    mem, _ = memory
    assert ask(mem, "Sarah Chen work") == []
    found = prompt_recall.gather(mem, "Priya Raman and Chen", set())
    assert found and found[0].stranger
    assert ask(mem, "Priya Raman and Chen") == []


def test_a_prompt_with_more_than_names_is_left_to_the_gate(memory):
    """Two other words besides the names ("work", "team"): the prompt asks something of its
    own, which the names alone do not answer, and the gate is silent on it."""
    mem, _ = memory
    found = prompt_recall.gather(mem, "Priya Raman work for the team", set())
    assert prompt_judge.judge(found, names=False) == []
    assert ask(mem, "Priya Raman work for the team") == []


def test_words_no_note_holds_count_against_a_prompt_of_names(memory):
    """Three words no note holds beside the names: the prompt asks about something this
    memory does not hold (a paraphrase, or another subject), not about the people alone."""
    mem, _ = memory
    prompt = "Priya Raman mentoring sessions quarterly"
    found = prompt_recall.gather(mem, prompt, set())
    assert prompt_judge.judge(found, names=False) == []
    assert ask(mem, prompt) == []


def test_one_rare_word_of_the_question_may_be_missing_from_the_notes(memory):
    """"projects" is rare here too (the planning note holds it) but is the question's own
    word: the notes naming Priya Raman hold every rare word but that one, and answer."""
    mem, ids = memory
    found = prompt_recall.gather(mem, "Priya Raman projects", set())
    assert prompt_judge.judge(found, names=False) == []
    assert set(ask(mem, "Priya Raman projects")) == {ids[GRADLE], ids[DASHBOARD]}
