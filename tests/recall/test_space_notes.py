"""The per-prompt notes over a hub space (issue 28), in-process on the real hub with real
roles: the user's own notes in a space come named by the space; a note another role wrote
into a space the user reads (a team space in `[hub] read`) comes only when trusted, with its
author, and the local file's notes stay first."""

from __future__ import annotations

import threading

from lore_plugin.hub import HubStore
from lore_plugin.recall import space_notes
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.space_notes import SpaceNotes, answer_with_spaces
from lore_plugin.recall.storing import store_knowledge
from tests.hub.team_roles import make_team

PROJECT = "github.com/acme/billing"
LOCAL = "The billing deploy window is Tuesday 14:00 to 16:00 UTC"
MINE = "The billing deploy window closes early on Fridays"  # my agent stored it
THEIRS_STATED = "The billing deploy window needs a release tag"
THEIRS_AGENT = "The billing deploy window moved to Monday mornings"
PROMPT = "When is the billing deploy window?"


def write(url: str, space: str, embedder, clock, fact: str, source: str) -> None:
    memory = Memory(HubStore(url, space), embedder, clock=clock, project=PROJECT)
    store_knowledge(memory, fact, fact, None, 2, source=source)
    memory.close()


def test_a_read_space_gives_my_notes_named_and_anothers_only_trusted_with_the_author(
        db_path, embedder, clock, hub_url, monkeypatch) -> None:
    # What is shown, not how fast: the deadline has its test through the hook (a hung hub).
    monkeypatch.setattr(space_notes, "NOTES_DEADLINE", 10.0)
    team = make_team(hub_url)
    write(team.urls["owner"], team.space, embedder, clock, MINE, "agent")
    write(team.urls["member"], team.space, embedder, clock, THEIRS_STATED, "user")
    write(team.urls["member"], team.space, embedder, clock, THEIRS_AGENT, "agent")
    local = Memory(db_path, embedder, clock=clock, project=PROJECT)
    store_knowledge(local, LOCAL, LOCAL, None, 2, source="remember")
    warm = threading.Event()
    warm.set()  # the model is loaded: the space is warmed by meaning too
    notes = SpaceNotes(team.space, lambda: Memory(HubStore(team.urls["owner"], team.space),
                                                  embedder, clock=clock, project=PROJECT), warm)
    notes._open()  # what the service does in the background at its start
    try:
        answer = answer_with_spaces(local, [notes], None, {"prompt": PROMPT, "seen": []},
                                    True, PROJECT)
    finally:
        notes.close()
        local.close()
    lines = (answer["context"] or "").splitlines()
    line = {fact: next((x for x in lines if fact in x), "")
            for fact in (LOCAL, MINE, THEIRS_STATED, THEIRS_AGENT)}
    assert line[LOCAL] and "space:" not in line[LOCAL]
    assert f"space: {team.space}" in line[MINE] and "from: agent" in line[MINE]
    assert f"from: {team.roles['member']}, user said" in line[THEIRS_STATED]
    assert f"space: {team.space}" in line[THEIRS_STATED]
    assert not line[THEIRS_AGENT]  # another role's agent note waits for a confirmation
    assert lines.index(line[LOCAL]) < lines.index(line[MINE])  # the local file first
