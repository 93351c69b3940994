"""A prompt about a time that is over gets the notes stored then (recall/prompt_dated.py,
issue 30): a day, and a longer period (a week, a month, a quarter) whose notes agree with
the prompt's other words. A time not yet over gets nothing from this rule. A real SQLite file
and the real MiniLM model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from lore_plugin.recall import prompt_candidates, prompt_recall
from lore_plugin.recall.memory import Memory

# Thursday 16 January 2025; "last week" is Monday 6 to Sunday 12 January.
THURSDAY = datetime(2025, 1, 16, 9, tzinfo=UTC).timestamp()
NOTES = [(7, "Moved the invoice job to the new queue."),
         (9, "Paired with Dana on the refund flow."),
         (10, "Upgraded the payments SDK to version 4."),
         (14, "Wrote the runbook for the failed card retries."),
         (15, "Reviewed the tax rounding change with Priya.")]


def ask(mem: Memory, prompt: str) -> list[str]:
    return prompt_recall.answer(mem, {"prompt": prompt, "seen": []}, warm=True)["ids"]


@pytest.fixture()
def weeks(isolated_home: Path, embedder, clock):
    """Project notes stored over two weeks (UTC): three last week, two this week."""
    mem = Memory(isolated_home / "weeks.db", embedder, clock=clock, tz=UTC)
    top = mem.store("Work on the billing service", "Billing service", depth=0,
                    source="user").id
    ids = {}
    for day, text in NOTES:
        clock.now = datetime(2025, 1, day, 15, tzinfo=UTC).timestamp()
        ids[day] = mem.store(text, text, parent_id=top, depth=1, source="user").id
    clock.now = THURSDAY
    yield mem, ids
    mem.close()


def test_a_prompt_about_last_week_gets_last_weeks_notes(weeks):
    """No note holds "work", so no answer passes the evidence; last week is the question."""
    mem, ids = weeks
    assert set(ask(mem, "what did we work on last week?")) == {ids[7], ids[9], ids[10]}


def test_of_a_periods_notes_only_those_holding_the_prompts_other_words_are_its_answers(weeks):
    """A week holds many notes: "payments" says which one of last week's is asked about."""
    mem, ids = weeks
    found = prompt_candidates.candidates(mem, "anything on payments last week?", set())
    assert found is not None
    assert {c.fragment.id for c in found if c.dated} == {ids[10]}


def test_this_week_is_not_over_so_a_memory_filled_this_week_gives_nothing(weeks, clock):
    """"what's up this week?" names a time and nothing else; it is most often not about
    memory, and every note of a memory filled this week was stored in it."""
    mem, _ = weeks
    clock.now = datetime(2025, 1, 16, 18, tzinfo=UTC).timestamp()
    for prompt in ("what's up this week?", "what did we do this week?",
                   "what happened this month?", "what did we work on in the past 2 weeks?"):
        assert ask(mem, prompt) == [], prompt
        found = prompt_candidates.candidates(mem, prompt, set())
        assert found is not None and not any(c.dated for c in found), prompt


def test_a_period_longer_than_a_quarter_or_a_prompt_that_asks_more_gets_nothing(weeks, clock):
    mem, _ = weeks
    clock.now = datetime(2026, 3, 1, tzinfo=UTC).timestamp()  # 2025 is over
    for prompt in ("what did we do in 2025?",
                   "how do I configure kubernetes ingress rewrites last january?"):
        assert ask(mem, prompt) == [], prompt


def test_a_month_that_is_over_marks_its_notes_and_another_month_none(weeks, clock):
    """All five notes hold "billing" with their branch."""
    mem, ids = weeks
    clock.now = datetime(2025, 3, 3, tzinfo=UTC).timestamp()

    def dated(prompt: str) -> set[str]:
        found = prompt_candidates.candidates(mem, prompt, set())
        assert found is not None
        return {c.fragment.id for c in found if c.dated}
    assert dated("what did we do on billing in January 2025?") == set(ids.values())
    assert dated("what did we do on billing in February 2025?") == set()


def test_a_prompt_naming_more_than_two_other_terms_is_left_to_the_evidence(weeks):
    """Its words say what it asks: the invoice note holds them all, yet the period does not
    make it an answer (the evidence alone judges it)."""
    mem, ids = weeks
    found = prompt_candidates.candidates(mem, "billing invoice queue moves last week?", set())
    assert found is not None and not any(c.dated for c in found)
    fewer = prompt_candidates.candidates(mem, "invoice queue last week?", set())
    assert fewer is not None and {c.fragment.id for c in fewer if c.dated} == {ids[7]}


def test_one_word_no_note_holds_is_the_questions_own_a_name_or_two_words_are_not(weeks):
    """"happened" is in no note: it says nothing about which of last week's notes is meant.
    A name no note holds ("Tim"), or two unknown words, say the prompt is about something
    else: a memory that never heard of Tim has nothing to say about his week."""
    mem, ids = weeks
    assert set(ask(mem, "what happened last week?")) == {ids[7], ids[9], ids[10]}
    for prompt in ("what did Tim do last week?", "kubernetes ingress last week?"):
        assert ask(mem, prompt) == [], prompt
        found = prompt_candidates.candidates(mem, prompt, set())
        assert found is not None and not any(c.dated for c in found), prompt


def test_a_day_asked_about_someone_this_memory_never_heard_of_gets_nothing(weeks):
    mem, ids = weeks
    assert ask(mem, "what did Priya do on 2025-01-15?") == [ids[15]]
    assert ask(mem, "what did Tim do on 2025-01-15?") == []


# A new user's memory: last quarter's work stored today through store_memory, content and
# summary only (Lore's placement makes the topics and concepts above), each note's day in
# its title, as the peer corpus writes it. Nothing but the text dates these notes.
TITLED = [("toast-analytics | 2025-01-10 | Tools: Read, Write",
           "Fixed the Spark job that dropped late events from the nightly rollup."),
          ("toast-analytics | 2025-01-28 | Tools: Bash, Read",
           "Rebuilt the Grafana dashboard for ingestion lag after the Kafka upgrade."),
          ("claude-memory | 2025-02-12 | Tools: Edit",
           "Added the session summary hook and its retry on a busy database."),
          ("claude-memory | 2025-03-15 | Tools: Read, Edit",
           "Profiled the indexer and cached the tokenizer between batches."),
          ("personal-docs | budget | Tools: Write",
           "Planned the budget review for January 2025 with the finance team.")]


@pytest.fixture()
def told(isolated_home: Path, embedder, clock):
    from lore_plugin.recall.storing import store_knowledge

    clock.now = datetime(2025, 4, 30, 12, tzinfo=UTC).timestamp()
    mem = Memory(isolated_home / "told.db", embedder, clock=clock, tz=UTC)
    ids = {title.split(" | ")[1]: store_knowledge(mem, text, title).fragment.id
           for title, text in TITLED}
    yield mem, ids
    mem.close()


def test_a_note_stored_today_about_a_past_day_answers_a_prompt_about_that_day(told):
    """Every note was created on 30 April; the one whose title names 10 January is that
    day's note. No note holds the prompt's other words ("happened"), and no cosine is near
    the gate: only the day written in the note can answer."""
    mem, ids = told
    assert {m.depth for m in (mem.get(i) for i in ids.values())} == {2}  # placed, not given
    assert ask(mem, "what happened on 2025-01-10?") == [ids["2025-01-10"]]
    assert ask(mem, "what was done on 2025-03-15") == [ids["2025-03-15"]]
    # A note naming the whole month is of the month, not of each of its days.
    assert set(ask(mem, "what did we work on in January 2025?")) == {
        ids["2025-01-10"], ids["2025-01-28"], ids["budget"]}


def test_a_day_no_note_names_and_a_day_not_over_get_nothing_from_the_written_days(told, clock):
    mem, ids = told
    found = prompt_candidates.candidates(mem, "what happened on 2025-01-11?", set())
    assert found is not None and not any(c.dated for c in found)
    clock.now = datetime(2025, 1, 10, 12, tzinfo=UTC).timestamp()  # that day is not over
    found = prompt_candidates.candidates(mem, "what happened on 2025-01-10?", set())
    assert found is not None and not any(c.dated for c in found)


def test_a_days_question_in_words_no_note_holds_still_gets_the_day_unless_it_names_someone(
        told):
    """No note of this memory, nor a heading Lore made from them, says "work" or "done":
    for one day those are the question's own words. A name no note holds still silences."""
    mem, ids = told
    _, stats = mem.reader.term_statistics(["work", "done"])
    assert [n for _, n in stats.values()] == [0, 0]
    assert ask(mem, "work done on 2025-01-28") == [ids["2025-01-28"]]
    assert ask(mem, "what did Tim do on 2025-01-28?") == []
