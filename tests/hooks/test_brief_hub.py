"""The SessionStart brief with a hub (issues 28, 29): knowledge of this project from a hub
space sits with the local file's, each hub line naming its space. The hook never opens
PostgreSQL itself: the memory service reads the hub for it, and with no service running the
part last read (an owner-only cache) is shown with its age while a detached job starts the
service; with neither, the brief says the hub part is not ready. A hub that is down or hangs
is named, and the hook stays within its deadline."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lore_plugin.core.config import Settings
from lore_plugin.core.project import project_key
from lore_plugin.hooks.brief import session_brief
from lore_plugin.hooks.brief_spaces import NOT_READY
from lore_plugin.hub import HubStore
from lore_plugin.recall import spaces_cache
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.storing import store_knowledge
from lore_plugin.service.client import ServiceClient
from lore_plugin.service.spaces_brief import SpacesBrief, refresh
from tests.conftest import PYTHON, python_env, wait_for, workers_idle
from tests.service_running import stop_service

HUB_FACT = "Releases are cut on Tuesdays only, never in a quarter's last week"
LATER_FACT = "Hotfixes skip the release train and need two reviewers"
LOCAL_FACT = "Run make db to start the local Postgres before the integration tests"


def remembered(memory: Memory, fact: str) -> None:
    store_knowledge(memory, fact, fact, None, 2, source="remember")


def hub_with(hub_url: str, project: Path, embedder, clock, *facts: str) -> str:
    space = f"t{os.urandom(6).hex()}"
    hub = Memory(HubStore(hub_url, space, create_space=True), embedder, clock=clock,
                 project=project_key(str(project)))
    for fact in facts:
        remembered(hub, fact)
    hub.close()
    return space


def test_with_no_service_the_brief_shows_the_cached_hub_part_with_its_age(
        tmp_path: Path, hub_url: str, embedder, clock, monkeypatch) -> None:
    monkeypatch.setenv("LORE_SERVICE", "off")  # the refresh reads the hub in-process
    project = tmp_path / "shop"
    project.mkdir()
    space = hub_with(hub_url, project, embedder, clock, HUB_FACT)
    settings = replace(Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home"),
                       hub_url=hub_url, hub_space=space)
    asked: list[bool] = []

    before = session_brief(settings, str(project), refresh=lambda: asked.append(True))
    assert before is not None and NOT_READY in before and HUB_FACT not in before
    assert asked == [True]  # no service answered: a refresh was started

    assert refresh(settings, str(project)) == {"by_service": 0, "parts": 1, "failed": 0}
    cache = Path(spaces_cache.cache_path(str(settings.home), project_key(str(project))))
    assert cache.stat().st_mode & 0o777 == 0o600
    assert cache.parent.stat().st_mode & 0o777 == 0o700
    local = Memory(settings.db_path, embedder, clock=clock, project=project_key(str(project)))
    remembered(local, LOCAL_FACT)
    local.close()
    with_both = session_brief(settings, str(project))

    assert HUB_FACT in with_both and f"space: {space}" in with_both
    assert "read less than a minute ago" in with_both
    local_line = next(line for line in with_both.splitlines() if LOCAL_FACT in line)
    assert "space:" not in local_line  # the local file is not named


def hook_env(home: Path, tmp_path: Path, hub_url: str, space: str) -> dict[str, str]:
    return python_env(LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"),
                      LORE_HUB_URL=hub_url, LORE_HUB_SPACE=space,
                      LORE_CLAUDE_PROJECTS=str(tmp_path / "projects"))


def settle(home: Path) -> None:
    """The detached refresh done (it started the service) and the service warm: a service
    still loading its model on this 2-core machine answers a hook late."""
    assert wait_for(lambda: workers_idle(home), 90), "the detached refresh never finished"
    client = ServiceClient(str(home), str(home / "memory.db"), wait=30)
    try:
        assert wait_for(lambda: client.request("status").get("warm"), 60)
    finally:
        client.close()


def stop(home: Path) -> None:
    wait_for(lambda: workers_idle(home), 90)  # a queued refresh would start another service
    stop_service(home)


def session_start(env: dict[str, str], tmp_path: Path, cwd: Path, *flags: str
                  ) -> tuple[str, float, str]:
    event = {"session_id": "s1", "transcript_path": str(tmp_path / "projects" / "s1.jsonl"),
             "cwd": str(cwd), "hook_event_name": "SessionStart", "source": "startup"}
    started = time.monotonic()
    done = subprocess.run([PYTHON, *flags, "-m", "lore_plugin.hooks", "session-start"],
                          input=json.dumps(event).encode(), env=env, capture_output=True,
                          timeout=60)
    took = time.monotonic() - started
    assert done.returncode == 0
    out = done.stdout.decode().strip()
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""
    return context, took, done.stderr.decode()


def test_the_hook_starts_the_service_and_then_reads_the_hub_through_it_without_the_driver(
        tmp_path: Path, hub_url: str, embedder, clock) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    space = hub_with(hub_url, project, embedder, clock, HUB_FACT)
    home = tmp_path / "home"
    env = hook_env(home, tmp_path, hub_url, space)
    try:
        first, _, _ = session_start(env, tmp_path, project)
        assert NOT_READY in first  # nothing cached, no service: said, never waited for
        cache = Path(spaces_cache.cache_path(str(home), project_key(str(project))))
        settle(home)  # the detached job started the service, which read the hub ...
        assert cache.exists()  # ... and wrote what it read for a brief without a service

        store = HubStore(hub_url, space)
        hub = Memory(store, embedder, clock=clock, project=project_key(str(project)))
        remembered(hub, LATER_FACT)  # after the cache was written: only a live read has it
        hub.close()
        context, _, imports = session_start(env, tmp_path, project, "-X", "importtime")
        assert HUB_FACT in context and LATER_FACT in context and f"space: {space}" in context
        assert "was not running" not in context and "did not answer" not in context
        assert "psycopg" not in imports  # the service holds the connection, not the hook
    finally:
        stop(home)


@pytest.fixture()
def silent_hub():
    """Accepts connections into its backlog and never answers: libpq waits in connect."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    yield f"postgresql://lore@127.0.0.1:{silent.getsockname()[1]}/lore"
    silent.close()


def test_a_hub_that_hangs_is_named_and_the_session_start_hook_returns_in_time(
        tmp_path: Path, embedder, clock, silent_hub) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    home = tmp_path / "home"
    local = Memory(home / "memory.db", embedder, clock=clock, project=project_key(str(project)))
    remembered(local, LOCAL_FACT)
    local.close()
    env = hook_env(home, tmp_path, silent_hub, "personal")
    try:
        first, took_alone, _ = session_start(env, tmp_path, project)
        assert LOCAL_FACT in first and NOT_READY in first
        settle(home)
        context, took, _ = session_start(env, tmp_path, project)
    finally:
        stop(home)
    assert LOCAL_FACT in context
    assert "hub space personal not reached" in context  # the service's answer, in time
    assert took < 2.0 and took_alone < 2.0, f"SessionStart took {took:.2f} s, {took_alone:.2f} s"


def test_a_space_that_stops_answering_is_served_from_its_last_read_and_named(
        tmp_path: Path, hub_url: str, embedder, clock, silent_hub) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    space = hub_with(hub_url, project, embedder, clock, HUB_FACT)
    settings = replace(Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home"),
                       hub_url=hub_url, hub_space=space)
    live = SpacesBrief(settings)
    try:
        fresh = live.answer(str(project), wait=20)
    finally:
        live.close()
    assert "error" not in fresh["hub"][space]
    down = SpacesBrief(replace(settings, hub_url=silent_hub))
    started = time.monotonic()
    stale = down.answer(str(project), wait=0.12)
    took = time.monotonic() - started
    down.close()
    assert took < 0.5
    part = stale["hub"][space]
    assert part["error"].startswith("no answer within") and part["items"]  # the last read
    brief = session_brief(replace(settings, hub_url=silent_hub), str(project))
    assert HUB_FACT in brief  # no service in this process: the cache, with its age


def test_a_damaged_cache_reads_as_none_and_the_brief_says_the_hub_part_is_not_ready(
        tmp_path: Path, silent_hub) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    settings = replace(Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home"),
                       hub_url=silent_hub, hub_space="personal")
    cache = Path(spaces_cache.cache_path(str(settings.home), project_key(str(project))))
    cache.parent.mkdir(parents=True)
    for garbage in (b"\x00\xff not json", b'{"hub": {"personal": {"items": [[1, 2]]}}}',
                    b'{"hub": [], "team": 3}', b"[]"):
        cache.write_bytes(garbage)
        started = time.monotonic()
        brief = session_brief(settings, str(project))
        assert brief is not None and NOT_READY in brief, garbage
        assert time.monotonic() - started < 1.0  # no connection tried: the hub is silent
