"""What a question asks for (recall/asked_for.py, issue 30): a note about a neighbour of what
is asked (the Grafana dashboard, for the Grafana alert threshold) does not pass the gate,
while a question the note answers still gets it. A real SQLite file, the real MiniLM model,
the server's own selection (prompt_recall.answer) as the socket runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.recall import prompt_recall
from lore_plugin.recall.asked_for import asked_for
from lore_plugin.recall.memory import Memory
from tests.conftest import note_adder

DASHBOARD = "Atlas observability: Sentry + Grafana dashboard"
SECRETS = "Atlas secrets in AWS Secrets Manager under atlas/prod/"
DEV = "Atlas local dev: make dev, API on port 8040"


@pytest.fixture()
def memory(isolated_home: Path, embedder, clock):
    """A new user's few atlas notes, under one project heading."""
    mem = Memory(isolated_home / "memory.db", embedder, clock=clock)
    ids: dict[str, str] = {}
    add = note_adder(mem, ids)
    atlas = add("The atlas API: how it is run, deployed and watched", "Project atlas", None, 0)
    add("Errors from atlas go to Sentry; the Grafana dashboard 'atlas-api' shows the error "
        "rate and p95 latency per endpoint.", DASHBOARD, atlas, 1)
    add("Atlas production secrets live in AWS Secrets Manager under atlas/prod/; never put "
        "them in .env files.", SECRETS, atlas, 1)
    add("Run atlas locally with `make dev`; the API listens on port 8040.", DEV, atlas, 1)
    add("Atlas uses PostgreSQL 16 with Alembic migrations.", "Atlas database: PostgreSQL 16",
        atlas, 1)
    add("Deploys of atlas to production need a release tag and Priya's approval.",
        "Atlas prod deploy: release tag plus approval", atlas, 1)
    yield mem, ids
    mem.close()


def ask(mem: Memory, prompt: str) -> dict:
    return prompt_recall.answer(mem, {"prompt": prompt, "seen": []}, warm=True)


def test_a_memory_that_does_not_hold_what_is_asked_stays_silent(memory):
    """No note holds "alert" or "threshold"; the dashboard note holds "Grafana", "atlas",
    "error rate" (evidence 0.92, far above the bar): the subject, not what is asked."""
    mem, _ = memory
    assert ask(mem, "what's the Grafana alert threshold for the atlas error rate?")["ids"] == []


def test_the_note_on_the_modifier_is_not_injected(memory):
    """No note holds "region"; the secrets note holds "AWS" and "atlas/prod" and is the
    first candidate (evidence 0.88). Here the prod-deploy note still passes the gate on
    "atlas production running" (0.66): it holds no word of what is asked, so this rule does
    not judge it."""
    mem, ids = memory
    assert ids[SECRETS] not in ask(mem, "which AWS region is atlas production running in?")["ids"]


@pytest.mark.parametrize(("prompt", "answer"), [
    ("which Grafana dashboard shows the atlas error rate?", DASHBOARD),
    ("where do atlas errors go, Sentry?", DASHBOARD),
    ("what's the atlas local dev port?", DEV),
    ("which AWS secrets manager holds the atlas production secrets?", SECRETS)])
def test_a_question_the_note_answers_still_gets_it(memory, prompt, answer):
    mem, ids = memory
    assert ids[answer] in ask(mem, prompt)["ids"]


@pytest.mark.parametrize(("prompt", "asked"), [
    ("what's the Grafana alert threshold for the atlas error rate?",
     ("grafana", "alert", "threshold")),
    ("Which AWS region is atlas production running in?", ("aws", "region")),
    ("who is the product manager for atlas?", ("product", "manager")),
    ("What type of car did Calvin work on?", ("car",)),
    ("What is Melanie's reason for getting into running?", ("reason",)),
    ("What helps Joanna stay distracted?", ("helps",)),
    ("which AWS service holds the atlas secrets?", ("aws", "service")),
    ("how many retries does the worker do?", ("retries",)),
    ("what does the deploy script do?", ()),
    ("fix the off-by-one error in this loop", ()),
    ("What is the port? And which region?", ())])
def test_the_phrase_a_question_asks_about(prompt, asked):
    """The head last; a possessor, a clause's subject and a prompt of several questions
    left out."""
    assert asked_for(prompt) == asked
