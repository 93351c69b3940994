"""The per-prompt notes over the hub spaces without the memory service (issue 28, "the other
surfaces"): with `LORE_SERVICE=off` the session's in-process MCP server answers the real
UserPromptSubmit hook on its own socket, and fuses the hub space's notes with the local
file's as the service does (tests/hooks/test_prompt_hub.py): named, framed, and a hub that
hangs costs the answer nothing."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lore_plugin.core.project import project_key
from lore_plugin.embedding.embedder import assemble_from_packages
from lore_plugin.hub import HubStore
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.prompt_socket import ask
from lore_plugin.safety.frame import TAG
from tests.conftest import MODEL_CACHE, PYTHON, ROOT, python_env, wait_for
from tests.hooks.test_prompt_hub import (
    FORGED,
    HUB_FACT,
    LOCAL_FACT,
    PROMPT,
    local_fact,
    prompt_hook,
    remembered,
)


def in_process_env(home: Path, hub_url: str, space: str) -> dict[str, str]:
    model_dir = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    return python_env(LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"),
                      LORE_PYTHON=PYTHON, LORE_EMBED_MODEL_DIR=str(model_dir),
                      LORE_NO_DOWNLOAD="1", LORE_SERVICE="off", LORE_HUB_URL=hub_url,
                      LORE_HUB_SPACE=space)


@contextlib.contextmanager
def in_process_server(env: dict[str, str], home: Path, project: Path) -> Iterator[None]:
    """The session's MCP server as Claude Code starts it (in the project, through
    scripts/lore-launch), in-process, until its model is warm; stopped by closing stdin."""
    proc = subprocess.Popen([str(ROOT / "scripts" / "lore-launch"), "mcp"], env=env, cwd=project,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    log = home / "logs" / "server.log"
    try:
        assert wait_for(lambda: log.exists() and "warm in" in log.read_text(), 120)
        assert not (home / "run" / "service.json").exists()  # no memory service answers
        yield
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "billing"
    folder.mkdir()
    return folder


def test_the_in_process_servers_notes_fuse_the_hub_space_named_and_framed(
        hub_url: str, embedder, clock, isolated_home, project) -> None:
    home = isolated_home
    local_fact(home, project, embedder, clock)
    space = f"t{time.monotonic_ns() % 10**9}"
    hub = Memory(HubStore(hub_url, space, create_space=True), embedder, clock=clock,
                 project=project_key(str(project)))
    remembered(hub, HUB_FACT, f"{HUB_FACT}. {FORGED}")
    hub.close()
    env = in_process_env(home, hub_url, space)
    with in_process_server(env, home, project):
        runs = iter(range(1000))
        # The server opens and warms the space in the background: asked until it is.
        assert wait_for(lambda: HUB_FACT in prompt_hook(env, project, f"s{next(runs)}")[0], 60)
        context, _ = prompt_hook(env, project, "final")
    assert LOCAL_FACT in context and HUB_FACT in context
    hub_line = next(line for line in context.splitlines() if HUB_FACT in line)
    local_line = next(line for line in context.splitlines() if LOCAL_FACT in line)
    assert f"space: {space}" in hub_line and "space:" not in local_line
    tags = re.findall(r"</?[A-Za-z][\w-]*", context)
    assert tags == [f"<{TAG}", f"</{TAG}"]  # the hub note forged no tag of its own


def test_a_hub_that_hangs_costs_the_in_process_answer_nothing(
        embedder, clock, isolated_home, project) -> None:
    home = isolated_home
    local_fact(home, project, embedder, clock)
    silent = socket.socket()  # accepts into its backlog, never answers: libpq waits
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = f"postgresql://lore@127.0.0.1:{silent.getsockname()[1]}/lore"
    env = in_process_env(home, url, "personal")
    try:
        with in_process_server(env, home, project):
            context, _ = prompt_hook(env, project, "s1")
            request = {"prompt": PROMPT, "seen": [], "cwd": str(project)}
            times = []
            for _ in range(3):
                started = time.monotonic()
                answer = ask(str(home), str(home / "memory.db"), request, 2.0)
                times.append(time.monotonic() - started)
                assert answer is not None and LOCAL_FACT in (answer.get("context") or "")
                assert answer.get("judged_by") == "cosine"  # the server's, not the keywords'
    finally:
        silent.close()
    assert LOCAL_FACT in context
    assert sorted(times)[1] < 0.25, f"the server answered in {times} with a silent hub"
