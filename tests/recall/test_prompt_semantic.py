"""A prompt worded differently from the note that answers it (recall/prompt_semantic.py, issue
30): one answer on meaning alone when it is unmistakable, silence otherwise. A real SQLite
file, the real MiniLM model, the server's own selection (prompt_recall.answer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.recall import prompt_judge, prompt_recall
from lore_plugin.recall.memory import Memory
from tests.conftest import note_adder

ROLLBACK = "Rollback is one argocd command"
RETENTION = "Log retention: 30 days, audit one year"
SCHEMA = "Orders schema edit failed the nightly load"
TABLE = "The kitchen table was replaced"


@pytest.fixture()
def memory(isolated_home: Path, embedder, clock):
    """A new user's few notes: operations (releases, data) and office life, with a handful of
    weekly routines alike in meaning."""
    mem = Memory(isolated_home / "memory.db", embedder, clock=clock)
    ids: dict[str, str] = {}
    add = note_adder(mem, ids)

    ops = add("How the shop's services are deployed and kept running", "Operations", None, 0)
    rel = add("Shipping releases and undoing them", "Releases", ops, 1)
    add("Rollback is one command: argocd app rollback to the previous revision, done by "
        "whoever is on call.", ROLLBACK, rel, 2)
    add("Releases leave every Tuesday and Thursday after the morning stand-up.",
        "Releases leave Tuesdays and Thursdays", rel, 2)
    data = add("The orders database and the nightly load", "Data", ops, 1)
    add("A schema edit in the orders source (amount split into net and gross) failed the "
        "nightly load until the mapping was fixed.", SCHEMA, data, 2)
    add("Loki keeps application logs for 30 days and audit logs for one year.", RETENTION,
        data, 2)
    office = add("Office life", "Office", None, 0)
    kitchen = add("The kitchen and shared spaces", "Kitchen", office, 1)
    add("The kitchen table broke last week and was replaced by a longer one.", TABLE, kitchen,
        2)
    add("Coffee beans are ordered every other Monday by the office manager.",
        "Coffee beans ordered every other Monday", kitchen, 2)
    schedule = add("Recurring meetings and chores", "Schedule", office, 1)
    for note in ("The team stand-up is at 09:30 every weekday.",
                 "The retrospective is held every second Friday afternoon.",
                 "A lunch-and-learn talk happens each Wednesday at noon.",
                 "Backups are restored and verified every Sunday night.",
                 "Plants in the office are watered on Mondays and Thursdays."):
        add(note, note, schedule, 2)
    yield mem, ids
    mem.close()


def ask(mem: Memory, prompt: str) -> list[str]:
    return prompt_recall.answer(mem, {"prompt": prompt, "seen": []}, warm=True)["ids"]


@pytest.mark.parametrize(("prompt", "note"), [
    ("switching back quickly when a version misbehaves", ROLLBACK),
    ("how long do we hold on to old output from the apps?", RETENTION),
])
def test_a_question_in_other_words_gets_its_note(memory, prompt, note):
    """No word of the prompt is in its note, so the keyword gate alone stays silent; the
    note's meaning stands clear of every other note's."""
    mem, ids = memory
    found = prompt_recall.gather(mem, prompt, set())
    assert prompt_judge.judge(found, semantic=False) == []
    assert ask(mem, prompt) == [ids[note]]


def test_a_near_miss_sharing_a_word_does_not_win(memory):
    """"table" is in the kitchen note, which MiniLM then rates close to the prompt; the note
    whose meaning answers holds none of its words and wins."""
    mem, ids = memory
    assert ask(mem, "upstream table changed its columns and broke things") == [ids[SCHEMA]]


def test_a_note_holding_a_few_of_the_prompts_words_is_no_answer_on_meaning(memory):
    """The kitchen note stands clear of the rest (cosine 0.41) but owes that to "table": it
    says the table was replaced, not where the engineers eat."""
    mem, _ = memory
    assert ask(mem, "which table do the engineers eat lunch at?") == []


def test_a_prompt_among_many_notes_alike_gets_nothing(memory):
    """The plants note is closest (cosine 0.47) but the other routines are nearly as close:
    the prompt points at a kind of note, not at one."""
    mem, _ = memory
    assert ask(mem, "which routines repeat on fixed days?") == []


def test_a_prompt_naming_what_memory_never_heard_of_gets_nothing(memory):
    """Close in meaning to the retention note, but about Datadog, which no note names."""
    mem, _ = memory
    assert ask(mem, "how long does Datadog hold on to old output from the apps?") == []


@pytest.mark.parametrize("prompt", ["what should I cook for dinner tonight?",
                                    "How does Kubernetes pick a node for a pod?"])
def test_an_unrelated_prompt_gets_nothing(memory, prompt):
    mem, _ = memory
    assert ask(mem, prompt) == []


def test_a_question_in_other_words_gets_the_reply_to_the_note_that_asks_it(
        isolated_home: Path, embedder, clock):
    """The closest note asks what the prompt asks ("Do you take your kids to the park
    often?"); the note after it answers, and is the one answer given."""
    from tests.recall.test_prompt_replies import QUESTION, REPLY, _fill
    mem = Memory(isolated_home / "chat.db", embedder, clock=clock)
    try:
        ids = _fill(mem, clock)
        prompt = "is a trip to the playground with the children a regular thing?"
        found = prompt_recall.gather(mem, prompt, set())
        top = max(found, key=lambda c: c.cosine)
        assert top.fragment.id == ids[QUESTION]
        assert ask(mem, prompt) == [ids[REPLY]]
    finally:
        mem.close()
