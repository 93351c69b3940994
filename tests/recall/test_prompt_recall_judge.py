"""The per-prompt decision (recall/prompt_judge.py, issue 30): the answer when the evidence
agrees, silence otherwise. A real SQLite file, the real MiniLM model, the server's own
selection (prompt_recall.answer) as the socket runs it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lore_plugin.core.types import Fragment
from lore_plugin.recall import prompt_evidence, prompt_judge, prompt_recall
from lore_plugin.recall.memory import Memory
from tests.conftest import note_adder

WINDOW = "The billing deploy window is Thursday 09:00 UTC"
APPROVAL = "Billing deploys need on-call approval"
INVOICES = "Invoices are generated on the 1st by invoice-cron"
RETRIES = "Failed payments retried 3 times by the dunning worker"
ROLLOUT = "New versions reach 5% of users for a day before everyone"


@pytest.fixture()
def memory(isolated_home: Path, embedder, clock):
    """Billing (deploys, invoices) and editor settings, as topic › concept › fact."""
    mem = Memory(isolated_home / "memory.db", embedder, clock=clock)
    ids: dict[str, str] = {}
    add = note_adder(mem, ids)

    billing = add("How the billing service is built, shipped and run", "Billing service", None, 0)
    deploys = add("When and how billing deploys happen", "Billing deploys", billing, 1)
    add("Agreed: billing deploys happen on Thursdays at 09:00 UTC, never on Fridays.", WINDOW,
        deploys, 2)
    add("A billing deploy needs the on-call engineer to approve it in the release channel.",
        APPROVAL, deploys, 2)
    invoices = add("Invoices and payment retries", "Invoices", billing, 1)
    add("Invoices are generated on the first day of each month by the invoice-cron job.",
        INVOICES, invoices, 2)
    add("Failed card payments are retried three times, two days apart, by the dunning worker.",
        RETRIES, invoices, 2)
    releases = add("How new versions of the app reach users", "Releases", None, 0)
    rollouts = add("Gradual rollouts", "Rollouts", releases, 1)
    add("A new version goes to 5% of users for one day, then to everyone if the error rate "
        "stays flat.", ROLLOUT, rollouts, 2)
    editor = add("Editor settings", "Editor preferences", None, 0)
    indent = add("Indentation", "Indentation preferences", editor, 1)
    add("The user wants tabs, not spaces, in Go files.", "The user prefers tabs in Go files",
        indent, 2)
    yield mem, ids
    mem.close()


def ask(mem: Memory, prompt: str) -> dict:
    return prompt_recall.answer(mem, {"prompt": prompt, "seen": []}, warm=True)


def test_a_clear_answer_is_injected_alone_with_its_path(memory):
    mem, ids = memory
    got = ask(mem, "Which job generates invoices?")
    assert got["ids"] == [ids[INVOICES]]
    assert f"Billing service › Invoices: {INVOICES}" in got["context"]


def test_a_weak_neighbour_does_not_share_the_budget_with_the_answer(memory):
    """The payment-retry note sits beside the answer and holds a third of the prompt's rare
    words ("billing" in its path), but its evidence is below the band: the 600 characters go
    to the answer alone."""
    mem, ids = memory
    assert ask(mem, "Which billing job generates invoices?")["ids"] == [ids[INVOICES]]


@pytest.mark.parametrize("prompt", ["How do I parse a JSON file in Rust?",
                                    "Who reviews pull requests for the billing service?",
                                    "Which editor does the team use?"])
def test_a_prompt_memory_cannot_answer_gets_nothing(memory, prompt):
    """The second names the billing service, which every billing note's path holds: words
    alone are not an answer when the meaning is elsewhere. The third matches only a heading
    ("Editor preferences"), whose one child (tabs in Go files) does not answer it: the
    heading is not injected in its place."""
    mem, _ = memory
    assert ask(mem, prompt)["context"] is None


def test_a_neighbour_with_the_meaning_but_not_the_words_stays_silent(memory):
    """MiniLM rates "rolled back" close to the deploy window (cosine ≈ 0.7), but none of the
    notes holds the words that ask for a rollback: nothing answers, so nothing is injected."""
    mem, _ = memory
    assert ask(mem, "When do billing deploys get rolled back?")["context"] is None


def test_the_prompts_words_lift_an_answer_that_meaning_alone_rates_below_the_bar(memory):
    """"ship" is not "deploy", yet the note and its branch hold "billing" and, in the topic's
    description, "shipped". The cosine alone (≈ 0.64) is below MIN_EVIDENCE; with the
    keyword evidence it is the answer, and it comes first."""
    mem, ids = memory
    got = ask(mem, "what day do we ship billing?")
    assert got["ids"] and got["ids"][0] == ids[WINDOW]


@pytest.mark.parametrize("prompt", ["how are rollouts staged?",
                                    "What fraction of users get a new version first?"])
def test_a_matched_concept_gives_way_to_its_child_which_is_judged_and_injected(memory, prompt):
    mem, ids = memory
    got = ask(mem, prompt)
    assert ids[ROLLOUT] in got["ids"]
    assert not {ids["Rollouts"], ids["Releases"]} & set(got["ids"])  # never the heading
    assert f"Releases › Rollouts: {ROLLOUT}" in got["context"]


def test_in_a_small_memory_a_word_half_the_notes_hold_still_counts_as_evidence():
    """FTS5's IDF floors a word that half the rows hold at nothing; in a new user's few notes
    that is every word a prompt shares with its answer. The smoothed weight keeps it."""
    terms = {"users": (frozenset({"user"}), 2), "fraction": (frozenset({"fraction"}), 0)}
    share = prompt_evidence.coverage(terms, 4, {"holds": frozenset({"user", "day"}),
                                                "lacks": frozenset({"day"})})
    assert 0.3 < share["holds"] < 1.0 and share["lacks"] == 0.0


def test_a_note_holds_the_prompts_words_in_its_own_text_or_only_through_its_branch(memory):
    """"billing" is in the branch of every billing note (its path) but in the text of few: the
    own coverage counts the note's text alone, so the model can tell the two apart."""
    mem, ids = memory
    found = {c.fragment.id: c for c in prompt_recall.candidates(mem, "Which billing job "
                                                                "generates invoices?", set())}
    invoices, retries = found[ids[INVOICES]], found[ids[RETRIES]]
    assert invoices.own > 0.5 and invoices.coverage >= invoices.own
    assert retries.own < retries.coverage  # "billing" only in its branch


@pytest.fixture()
def chat(isolated_home: Path, embedder, clock):
    """Two people's small talk, as a conversation is stored: topic › concept › turns."""
    mem = Memory(isolated_home / "chat.db", embedder, clock=clock)
    top = mem.store("Chats between James and John", "James and John", depth=0, source="user").id
    talk = mem.store("James and John talk about their dogs, books and weekends",
                     "Dogs, books and weekends", parent_id=top, depth=1, source="user").id
    ids = {}
    for text, summary in [
            ("James: I love to read, especially snuggled under the covers on a cold winter "
             "day.", "James likes reading under the covers on cold winter days"),
            ("John: Winter is here, the dogs hate the cold and stay inside all day.",
             "John's dogs stay inside in winter"),
            ("James: My dogs cheer me up on dark days; Max always makes me smile.",
             "James's dog Max cheers him up"),
            ("John: On cold days I go skiing with my brother in the mountains.",
             "John skis on cold days"),
            ("James: Last weekend I walked the dogs by the lake.",
             "James walked the dogs by the lake")]:
        ids[summary] = mem.store(text, summary, parent_id=talk, depth=2, source="user").id
    yield mem, ids
    mem.close()


def test_the_answers_are_ordered_by_the_model_not_by_the_gates_evidence(chat):
    """By the gate's evidence (cosine + 0.4 × coverage) John's skiing (closer in meaning) would
    come before John's dogs (more of the prompt's words: "winter", "cold"); the model weighs
    the words as much as the meaning, and the answer leads either way."""
    mem, ids = chat
    found = prompt_recall.candidates(mem, "What does James enjoy doing on cold winter days?",
                                     set())
    by_evidence = sorted(found, key=lambda c: -prompt_judge.evidence(c))
    assert [c.fragment.summary for c in by_evidence[1:3]] == [
        "John skis on cold days", "John's dogs stay inside in winter"]
    got = [f.summary for f in prompt_judge.judge(found)]
    assert got == ["James likes reading under the covers on cold winter days",
                   "John's dogs stay inside in winter", "John skis on cold days"]


def bare_note(fid: str) -> Fragment:
    """A note with nothing but its id and summary: the judge reads only its evidence."""
    return Fragment(id=fid, content="", summary=f"note {fid}", depth=2, created_at=0.0,
                    last_accessed=0.0, access_count=0, importance=0.5, decay_rate=0.0,
                    last_reinforced=0.0, relevance_score=0.5)


def test_the_model_rates_the_prompts_words_in_a_notes_own_text_and_searchs_first_place():
    """The fitted weights' directions: the same evidence is likelier when the note's own text
    holds the words (not only its branch), when hybrid search placed it first, and when one of
    its cues is close to the prompt."""
    base = prompt_evidence.Candidate(bare_note("n"), 0.55, 0.0, False, coverage=0.6, own=0.0, rank=4)
    assert prompt_judge.probability(replace(base, own=0.6)) > prompt_judge.probability(base)
    assert prompt_judge.probability(replace(base, rank=0)) > prompt_judge.probability(base)
    assert prompt_judge.probability(replace(base, coverage=0.9)) > prompt_judge.probability(base)
    assert prompt_judge.probability(replace(base, cue=0.7)) > prompt_judge.probability(base)


def test_a_close_cue_puts_its_note_first_among_the_answers_that_pass():
    """Two notes pass the gate on the same evidence; the one whose cue is close to the prompt
    is injected first (the order the model fitted with cues gives)."""
    plain = prompt_evidence.Candidate(bare_note("a"), 0.6, 0.0, False, coverage=0.6, own=0.6, rank=0)
    cued = prompt_evidence.Candidate(bare_note("b"), 0.6, 0.0, False, coverage=0.6, own=0.6, rank=1,
                                     cue=0.8)
    assert [f.id for f in prompt_judge.judge([plain, cued])] == ["b", "a"]
