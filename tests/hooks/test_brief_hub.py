"""The SessionStart brief with a hub (issue 28): knowledge of this project from a hub space
sits with the local file's, each hub line naming its space; a machine with an empty local
file still gets it; a hub that is down or hangs is named and the hook stays in its budget."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from lore_plugin.core.config import Settings
from lore_plugin.core.project import project_key
from lore_plugin.hooks.brief import session_brief
from lore_plugin.hub import HubStore
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.storing import store_knowledge
from tests.conftest import PYTHON, python_env

HUB_FACT = "Releases are cut on Tuesdays only, never in a quarter's last week"
LOCAL_FACT = "Run make db to start the local Postgres before the integration tests"


def remembered(memory: Memory, fact: str) -> None:
    store_knowledge(memory, fact, fact, None, 2, source="remember")


def test_the_brief_holds_the_hub_spaces_knowledge_named_beside_the_local_files(
        tmp_path: Path, hub_url: str, embedder, clock) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    space = f"t{os.urandom(6).hex()}"
    hub = Memory(HubStore(hub_url, space, create_space=True), embedder, clock=clock,
                 project=project_key(str(project)))
    remembered(hub, HUB_FACT)
    hub.close()
    settings = replace(Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home"),
                       hub_url=hub_url, hub_space=space)

    on_a_new_machine = session_brief(settings, str(project))
    local = Memory(settings.db_path, embedder, clock=clock, project=project_key(str(project)))
    remembered(local, LOCAL_FACT)
    local.close()
    with_both = session_brief(settings, str(project))

    assert HUB_FACT in on_a_new_machine and f"space: {space}" in on_a_new_machine
    assert HUB_FACT in with_both and LOCAL_FACT in with_both
    local_line = next(line for line in with_both.splitlines() if LOCAL_FACT in line)
    assert "space:" not in local_line  # the local file is not named


def test_a_hub_that_hangs_is_named_and_the_session_start_hook_returns_in_time(
        tmp_path: Path, embedder, clock) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    local = Memory(tmp_path / "home" / "memory.db", embedder, clock=clock,
                   project=project_key(str(project)))
    remembered(local, LOCAL_FACT)
    local.close()
    # Accepts connections into its backlog and never answers: libpq waits in connect.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    env = python_env(LORE_HOME=str(tmp_path / "home"),
                     LORE_DB_PATH=str(tmp_path / "home" / "memory.db"),
                     LORE_HUB_URL=f"postgresql://lore@127.0.0.1:{port}/lore",
                     LORE_HUB_SPACE="personal", LORE_CLAUDE_PROJECTS=str(tmp_path / "projects"))
    event = {"session_id": "s1", "transcript_path": str(tmp_path / "projects" / "s1.jsonl"),
             "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}

    started = time.monotonic()
    done = subprocess.run([PYTHON, "-m", "lore_plugin.hooks", "session-start"],
                          input=json.dumps(event).encode(), env=env, capture_output=True,
                          timeout=30)
    took = time.monotonic() - started
    silent.close()

    assert done.returncode == 0
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert LOCAL_FACT in context
    assert "hub space personal not reached" in context
    assert took < 2.5, f"SessionStart took {took:.2f} s with a silent hub"
