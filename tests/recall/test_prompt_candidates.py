"""Where the per-prompt selection looks (recall/prompt_candidates.py, issue 30): search's hits,
the children of a matched heading, and the hits for the prompt's rarest words. A real SQLite
file and the real MiniLM model."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.recall import prompt_candidates, prompt_recall
from lore_plugin.recall.memory import Memory

# Many notes on one subject, close in meaning; one of them names the dog the prompt asks about.
DOG_NOTES = [
    "Our dogs eat dry food twice a day, morning and evening.",
    "The vet said the dogs should get less food and more walks.",
    "The dogs love the big park by the river on weekends.",
    "We buy the dogs' food in large bags from the pet shop.",
    "The dogs sleep in the kitchen when it is cold outside.",
    "The younger dog is learning to sit and stay with treats.",
    "Both dogs need their vaccinations every spring.",
    "The dogs bark at the postman every single morning.",
]
BISCUIT = "Biscuit hides under the bed whenever there is thunder."


@pytest.fixture()
def dogs(isolated_home: Path, embedder, clock):
    mem = Memory(isolated_home / "dogs.db", embedder, clock=clock)
    top = mem.store("Everything about the family dogs", "Family dogs", depth=0,
                    source="user").id
    ids = {text: mem.store(text, text, parent_id=top, depth=1, source="user").id
           for text in [*DOG_NOTES, BISCUIT]}
    yield mem, ids
    mem.close()


# Most of its words and its meaning point at the feeding notes; only "Biscuit" at the other.
PROMPT = "Do the dogs eat dry food from the pet shop every morning and evening, like Biscuit?"


def test_the_rarest_words_the_memory_holds_make_the_extra_search(dogs):
    """"biscuit" is held by one note, "dog" by all; a word no note holds finds nothing and is
    left out rather than spending one of the few places."""
    mem, _ = dogs
    expr = prompt_candidates.rare_expression(mem.reader, "Does Biscuit like zanzibar dogs?",
                                             most=1)
    assert expr == '"biscuit"'
    assert prompt_candidates.rare_expression(mem.reader, "zanzibar quokka") is None


def test_a_note_holding_the_prompts_rare_word_joins_after_searchs_hits(dogs):
    """With two search hits, the note that names Biscuit is not among search's answers; the
    rare-word search brings it, placed after search's hits, with its place among those hits."""
    mem, ids = dogs
    plain = prompt_candidates.candidates(mem, PROMPT, set(), limit=2, rare_hits=0)
    assert plain is not None and ids[BISCUIT] not in {c.fragment.id for c in plain}
    found = prompt_candidates.candidates(mem, PROMPT, set(), limit=2, rare_hits=2)
    assert found is not None
    biscuit = next(c for c in found if c.fragment.id == ids[BISCUIT])
    assert biscuit.rare >= 0 and biscuit.rank >= len(plain)
    assert biscuit.own > 0 and biscuit.cosine > 0
    assert [c.fragment.id for c in found[:len(plain)]] == [c.fragment.id for c in plain]


def test_a_rare_word_hit_already_seen_in_this_session_is_not_offered_again(dogs):
    mem, ids = dogs
    found = prompt_candidates.candidates(mem, PROMPT, {ids[BISCUIT]}, limit=2, rare_hits=2)
    assert found is not None and ids[BISCUIT] not in {c.fragment.id for c in found}


class Counting:
    """The real model, counting the texts it is asked to embed."""

    def __init__(self, model) -> None:
        self.model, self.texts = model, []

    def embed(self, texts):
        self.texts += list(texts)
        return self.model.embed(texts)

    def __getattr__(self, name):
        return getattr(self.model, name)


def test_the_prompt_is_embedded_once_for_search_and_the_rare_word_hits(dogs):
    """The rare-word hits need the prompt's vector for their cosine; search has just embedded
    the same text, and embedding it again would cost 20-40 ms of the hook's budget."""
    mem, _ = dogs
    counting = Counting(mem.embedder)
    mem.embedder = counting
    found = prompt_candidates.candidates(mem, PROMPT, set(), limit=2, rare_hits=2)
    assert found and any(c.rare >= 0 for c in found)
    assert counting.texts.count(PROMPT) == 1


@pytest.fixture()
def diary(isolated_home: Path, embedder, clock):
    """Project notes stored on three days (UTC), a clock two days after the last."""
    from datetime import UTC, datetime

    mem = Memory(isolated_home / "diary.db", embedder, clock=clock, tz=UTC)
    top = mem.store("Work on the billing service", "Billing service", depth=0,
                    source="user").id
    ids = {}
    for day, text in [(10, "Moved the invoice job to the new queue."),
                      (10, "Paired with Dana on the refund flow."),
                      (11, "Upgraded the payments SDK to version 4."),
                      (14, "Wrote the runbook for failed card payments.")]:
        clock.now = datetime(2025, 1, day, 15, tzinfo=UTC).timestamp()
        ids[text] = mem.store(text, text, parent_id=top, depth=1, source="user").id
    clock.now = datetime(2025, 1, 16, 9, tzinfo=UTC).timestamp()
    yield mem, ids
    mem.close()


def test_a_prompt_about_a_day_gets_that_days_notes_and_no_others(diary):
    """No note holds "happened", so no answer passes the evidence; the day is the question."""
    mem, ids = diary
    got = prompt_recall.answer(mem, {"prompt": "what happened on 2025-01-10?", "seen": []},
                               warm=True)
    assert set(got["ids"]) == {ids["Moved the invoice job to the new queue."],
                               ids["Paired with Dana on the refund flow."]}


def test_a_day_with_no_notes_or_a_prompt_that_asks_more_than_the_day_gets_nothing(diary):
    mem, _ = diary
    for prompt in ("what happened on 2025-01-12?",
                   "how do I configure kubernetes ingress rewrites on 2025-01-10?",
                   "what happened in January 2025?"):
        got = prompt_recall.answer(mem, {"prompt": prompt, "seen": []}, warm=True)
        assert got["ids"] == [], prompt


def test_a_prompt_that_names_today_is_not_answered_by_todays_notes(diary, clock):
    """Today is not over: a prompt naming it ("the weather today") is most often not about
    memory, and in a memory filled today every note was stored that day."""
    mem, _ = diary
    from datetime import UTC, datetime

    clock.now = datetime(2025, 1, 11, 18, tzinfo=UTC).timestamp()  # a note today, two yesterday
    for prompt in ("what's the weather like today?", "what happened today?"):
        got = prompt_recall.answer(mem, {"prompt": prompt, "seen": []}, warm=True)
        assert got["ids"] == [], prompt
    got = prompt_recall.answer(mem, {"prompt": "what happened yesterday?", "seen": []},
                               warm=True)
    assert got["ids"], "yesterday is over: its notes answer"


# A conversation: the question's words are in one turn, its answer in the reply after it.
CHAT = ["Lee: Did you see the football game last night?",
        "Dana: No, I was busy repainting the kitchen walls.",
        "Lee: What dish did you cook for the book club dinner?",
        "Dana: A spinach lasagna with three cheeses; everyone loved it.",
        "Lee: My cat knocked a vase off the shelf this morning.",
        "Dana: Oh no, is the cat alright?"]


@pytest.fixture()
def chat(isolated_home: Path, embedder, clock):
    """The turns under one topic, chained in the order they came by temporal edges, as
    capture chains siblings (capture/linking.temporal_edges)."""
    mem = Memory(isolated_home / "chat.db", embedder, clock=clock)
    top = mem.store("Chats between Dana and Lee", "Dana and Lee", depth=0, source="user").id
    ids = [mem.store(text, text, parent_id=top, depth=1, source="user").id for text in CHAT]
    for earlier, later in zip(ids, ids[1:]):
        mem.writer.link(earlier, later, "temporal", 1.0, clock())
    yield mem, ids
    mem.close()


def test_the_turns_next_to_a_hit_join_the_candidates_after_the_others(chat):
    """With one search hit (the question), the reply that answers it is a candidate only as
    the hit's neighbour in time; the turns further away are not."""
    mem, ids = chat
    prompt = "What dish did Dana cook for the book club dinner?"
    alone = prompt_candidates.candidates(mem, prompt, set(), limit=1, rare_hits=0,
                                         neighbours_of=0)
    assert alone is not None and [c.fragment.id for c in alone] == [ids[2]]
    found = prompt_candidates.candidates(mem, prompt, set(), limit=1, rare_hits=0)
    assert found is not None
    assert found[0].fragment.id == ids[2]
    assert {c.fragment.id for c in found[1:]} == {ids[1], ids[3]}
    reply = next(c for c in found if c.fragment.id == ids[3])
    assert reply.rank > found[0].rank and reply.cosine > 0 and reply.own > 0
    seen = prompt_candidates.candidates(mem, prompt, {ids[3]}, limit=1, rare_hits=0)
    assert seen is not None and ids[3] not in {c.fragment.id for c in seen}
