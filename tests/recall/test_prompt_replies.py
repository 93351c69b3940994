"""A question a note asks is answered by the note after it (recall/prompt_replies.py and
prompt_judge.answered, issue 30). A real SQLite file, the real MiniLM model, the server's own
selection (prompt_recall.answer)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lore_plugin.core.types import Fragment
from lore_plugin.recall import prompt_judge, prompt_recall, prompt_replies
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.prompt_evidence import Candidate

QUESTION = "Maria: Parenting is tough but rewarding. Do you take your kids to the park often?"
REPLY = "John: Yeah, we go a few times a week. It's great for family bonding."
STATEMENT = "John: I finished the treehouse for my kids last weekend."
AFTER_STATEMENT = "Maria: That sounds like a lovely project, well done."
TURNS = [
    "John: Work has been busy, but the weekends are for family.",
    QUESTION,
    REPLY,
    "Maria: I love that. Outdoor time is so good for children.",
    "John: The kids had a lot of fun on the swings at the park on Sunday.",
    STATEMENT,
    AFTER_STATEMENT,
    "Maria: My sister takes her kids to the zoo every month.",
]


def _fill(mem: Memory, clock) -> dict[str, str]:
    """Two people's chat, stored as capture stores a slice: topic › concept › turns, each
    turn chained to the next by a temporal edge."""
    top = mem.store("Chats between John and Maria", "John and Maria", depth=0,
                    source="user").id
    talk = mem.store("John and Maria talk about family, work and weekends",
                     "Family and weekends", parent_id=top, depth=1, source="user").id
    ids = {}
    for text in TURNS:
        ids[text] = mem.store(text, text, parent_id=talk, depth=2, source="user").id
    for earlier, later in zip(TURNS, TURNS[1:]):
        mem.writer.link(ids[earlier], ids[later], "temporal", 1.0, clock())
    return ids


@pytest.fixture()
def chat(isolated_home: Path, embedder, clock):
    mem = Memory(isolated_home / "chat.db", embedder, clock=clock)
    yield mem, _fill(mem, clock)
    mem.close()


def ask(mem: Memory, prompt: str) -> dict:
    return prompt_recall.answer(mem, {"prompt": prompt, "seen": []}, warm=True)


def test_the_reply_to_the_question_the_prompt_repeats_is_injected_first(chat):
    """The question holds the prompt's words ("kids", "park", "often"); its reply holds
    almost none, and on its own words the agreement rule would keep it out. Following the
    question, it takes the question's evidence and comes first; the question, which asks and
    does not answer, ranks below it."""
    mem, ids = chat
    found = {c.fragment.id: c for c in prompt_recall.gather(
        mem, "How often does John take his kids to the park?", set()) or []}
    assert found[ids[REPLY]].coverage < prompt_judge.MIN_AGREEMENT  # alone, it would not pass
    assert found[ids[REPLY]].follows == ids[QUESTION]
    got = ask(mem, "How often does John take his kids to the park?")
    assert got["ids"] and got["ids"][0] == ids[REPLY]


def test_a_hub_space_answers_with_the_reply_too(hub_space, embedder, clock):
    """The same chat in a hub space (PostgreSQL): its edges, vectors and keyword counts are
    the hub's own."""
    mem = Memory(hub_space, embedder, clock=clock)
    try:
        ids = _fill(mem, clock)
        got = ask(mem, "How often does John take his kids to the park?")
        assert got["ids"] and got["ids"][0] == ids[REPLY]
        _reply_joins_after_its_question(mem, ids)
    finally:
        mem.close()


def test_a_reply_search_did_not_bring_joins_right_after_its_question(chat):
    _reply_joins_after_its_question(*chat)


def _reply_joins_after_its_question(mem: Memory, ids: dict[str, str]) -> None:
    prompt = "How often does John take his kids to the park?"
    found = [c for c in prompt_recall.candidates(mem, prompt, set()) or []
             if c.fragment.id != ids[REPLY]]
    got = prompt_replies.with_replies(mem, prompt, found, set())
    order = [c.fragment.id for c in got]
    assert order[order.index(ids[QUESTION]) + 1] == ids[REPLY]
    reply = got[order.index(ids[REPLY])]
    assert reply.follows == ids[QUESTION] and 0 < reply.cosine < 1 and reply.path
    # Nor is a reply the prompt has already seen brought back.
    again = prompt_replies.with_replies(mem, prompt, found, {ids[REPLY]})
    assert ids[REPLY] not in [c.fragment.id for c in again]


def test_only_a_note_that_asks_brings_the_note_after_it(chat):
    mem, ids = chat
    prompt = "What did John build for his kids?"
    got = {c.fragment.id: c for c in prompt_recall.gather(mem, prompt, set()) or []}
    assert ids[STATEMENT] in got
    assert all(c.follows != ids[STATEMENT] for c in got.values())


def _note(fid: str, text: str) -> Fragment:
    return Fragment(id=fid, content="", summary=text, depth=2, created_at=0.0,
                    last_accessed=0.0, access_count=0, importance=0.5, decay_rate=0.0,
                    last_reinforced=0.0, relevance_score=0.5)


def test_a_reply_takes_the_better_of_its_own_and_its_questions_evidence():
    question = Candidate(_note("q", "Do you go to the park often?"), 0.6, 0.0, False,
                         coverage=0.9, own=0.8, rank=0)
    reply = Candidate(_note("r", "A few times a week."), 0.5, 0.0, False, coverage=0.1,
                      own=0.1, rank=1, follows="q")
    other = replace(reply, fragment=_note("o", "We like the zoo."), follows="")
    q, r, o = prompt_judge.answered([question, reply, other])
    assert (r.cosine, r.coverage, r.own, r.rank) == (0.5, 0.9, 0.8, 0)  # its own meaning
    assert q.own == 0.0 and q.coverage == 0.9  # still counts for the gate, not the order
    assert o == other
    assert prompt_judge.judge([question, reply, other])[0].id == "r"



@pytest.mark.parametrize(("text", "question"), [
    ("Do you take your kids to the park often?", True),
    ('She asked "why now?" and left.', True),
    ("Is the build green?? It was red", True),
    ("Docs at https://example.com/search?q=retries&page=2 list the flags.", False),
    ("The guard reads `ready ? run() : wait()` on startup.", False),
    ("Deploys happen on Thursdays.", False)])
def test_a_note_asks_when_a_sentence_ends_with_a_question_mark(text, question):
    """A project's notes hold URLs and code: a query string's or a conditional's "?" is no
    question, and the note after such a note is not its answer."""
    assert prompt_replies.asks(_note("n", text)) is question
