"""`lore unshare ID` killed midway (issue 29: exactly once, crash-safe): a real CLI process
SIGKILLs itself at each step (core/faults.py). Killed after the copy, the knowledge is in
both places and running the command again finishes the move; killed after the team's rows
went, running it again says the fragment is local already. Never lost, never duplicated."""

from __future__ import annotations

import subprocess

import pytest

from lore_plugin.core import faults
from lore_plugin.hub import HubStore
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.storing import store_knowledge
from lore_plugin.store import Store
from tests.conftest import PYTHON, python_env

POINTS = ("unshare-after-copy", "unshare-after-delete")


def test_the_points_are_the_ones_unshare_passes() -> None:
    assert set(POINTS) == set(faults.UNSHARE_POINTS)


def _lore(tmp_path, hub_url: str, *args: str, crash: str = "") -> subprocess.CompletedProcess:
    env = python_env(LORE_HOME=str(tmp_path / "home"), LORE_DB_PATH=str(tmp_path / "memory.db"),
                     LORE_HUB_URL=hub_url, LORE_HUB_SPACE="local", LORE_CRASH_AT=crash)
    return subprocess.run([PYTHON, "-m", "lore_plugin.cli", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def _copies(db, hub: HubStore, ids: list[str]) -> tuple[int, int]:
    store = Store(db)
    try:
        local = sum(1 for r in store.export_fragments() if r["id"] in ids)
    finally:
        store.close()
    return local, sum(1 for r in hub.export_fragments() if r["id"] in ids)


@pytest.mark.parametrize("point", POINTS)
def test_an_unshare_killed_midway_is_finished_by_running_it_again(
        tmp_path, hub_url, hub_space, embedder, point):
    memory = Memory(tmp_path / "memory.db", embedder, project="github.com/acme/platform-api")
    topic = store_knowledge(memory, "The platform API", "Platform API", None, 0, "user").fragment
    fact = store_knowledge(memory, "Handlers return problem+json", "Problem+json", topic.id, 1,
                           "user").fragment
    memory.close()
    space = hub_space.space
    shared = _lore(tmp_path, hub_url, "share", fact.id[:12], "--space", space)
    assert shared.returncode == 0, shared.stderr
    assert _copies(tmp_path / "memory.db", hub_space, [fact.id]) == (0, 1)

    killed = _lore(tmp_path, hub_url, "unshare", fact.id[:12], "--space", space, crash=point)
    assert killed.returncode == -9, killed.stderr
    after_kill = (1, 1) if point == "unshare-after-copy" else (1, 0)
    assert _copies(tmp_path / "memory.db", hub_space, [fact.id]) == after_kill

    again = _lore(tmp_path, hub_url, "unshare", fact.id[:12], "--space", space)
    if point == "unshare-after-copy":
        assert again.returncode == 0, again.stderr
    else:
        assert again.returncode == 1 and again.stderr.count("\n") == 1
        assert "in your own memory already" in again.stderr
    assert _copies(tmp_path / "memory.db", hub_space, [fact.id]) == (1, 0)
    store = Store(tmp_path / "memory.db")
    try:
        assert store.get(fact.id).summary == "Problem+json"
        assert store.parent_id(fact.id) == topic.id
    finally:
        store.close()
