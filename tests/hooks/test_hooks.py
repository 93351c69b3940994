"""The hook entry points as Claude Code runs them: real subprocesses, real payloads, a
detached worker that really ingests through a fake API on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from lore_plugin.core.locks import transcript_lock
from lore_plugin.hooks.dispatch import parse_event
from lore_plugin.store import Store
from tests.conftest import (
    FIXTURES,
    HOOK_STARTUPS,
    PYTHON,
    no_worker_started,
    startup_seconds,
    wait_for,
    workers_idle,
)
from tests.transcripts import TranscriptWriter

# Where Claude Code writes a session's transcript under the HOME the env fixture sets: the
# hooks accept transcripts only inside Claude Code's projects folder.
TRANSCRIPT = "home/.claude/projects/-work-project-a/t.jsonl"
SAMPLES = [json.loads(line) for line in (FIXTURES / "hook_stdin_samples.jsonl").read_text().splitlines()]


def run_hook(name: str, payload: dict | bytes, env: dict) -> tuple[subprocess.CompletedProcess, float]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    started = time.monotonic()
    # communicate() returns only when stdout and stderr close: what Claude Code waits for.
    proc = subprocess.run([PYTHON, "-m", "lore_plugin.hooks", name], input=raw, env=env,
                          capture_output=True, timeout=30)
    return proc, time.monotonic() - started


def payload(event: str, writer: TranscriptWriter, **extra) -> dict:
    return {"session_id": writer.session, "transcript_path": str(writer.path), "cwd": writer.cwd,
            "hook_event_name": event, **extra}


def fact_count(db: Path) -> int:
    if not db.exists():
        return 0
    store = Store(db, readonly=True)
    try:
        return int(store.execute("SELECT count(*) FROM fragments WHERE depth = 2")[0][0])
    finally:
        store.close()


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s["stdin"]["hook_event_name"])
def test_every_recorded_payload_parses_into_a_hook_event(sample, tmp_path):
    # The recorded path, moved under this test's HOME, where the file then exists.
    recorded = sample["stdin"]["transcript_path"]
    moved = tmp_path / "home" / recorded[recorded.index(".claude/projects/"):]
    moved.parent.mkdir(parents=True)
    moved.write_text("")
    stdin = dict(sample["stdin"], transcript_path=str(moved))
    event = parse_event(json.dumps(stdin).encode(), "x", env={"HOME": str(tmp_path / "home")})
    assert event.session_id == sample["stdin"]["session_id"]
    assert event.transcript_path == str(moved)
    assert event.cwd == sample["stdin"]["cwd"]
    elsewhere = parse_event(json.dumps(sample["stdin"]).encode(), "x",
                            env={"HOME": str(tmp_path / "home")})
    assert elsewhere.transcript_path is None  # the recorded machine's path is not under HOME


def test_outside_paths_and_ids_are_validated():
    event = parse_event(json.dumps({"session_id": "../../etc", "transcript_path": "relative.jsonl",
                                    "cwd": 5}).encode(), "stop")
    assert event.session_id == "" and event.transcript_path is None and event.cwd is None
    assert parse_event(b'{"transcript_path": "/etc/passwd"}', "stop").transcript_path is None


def test_stop_with_no_batch_due_returns_without_a_worker(tmp_path, env, isolated_home):
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    writer.exchange(2)
    proc, took = run_hook("stop", payload("Stop", writer, stop_hook_active=False), env)
    assert proc.returncode == 0 and proc.stdout == b""
    assert took < HOOK_STARTUPS["stop"] * startup_seconds(), took
    assert no_worker_started(isolated_home)
    assert fact_count(isolated_home / "memory.db") == 0


def test_stop_with_a_batch_due_starts_a_detached_worker_that_ingests(tmp_path, env, isolated_home, api):
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    writer.exchange(6)
    proc, took = run_hook("stop", payload("Stop", writer), env)
    assert proc.returncode == 0 and took < HOOK_STARTUPS["stop"] * startup_seconds(), took
    assert wait_for(lambda: fact_count(isolated_home / "memory.db") == 6)
    assert Store(isolated_home / "memory.db").watermark(str(writer.path)) == writer.path.stat().st_size


def test_session_end_detaches_the_flush_and_returns_within_half_a_second(tmp_path, env, isolated_home):
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    writer.exchange(2)
    run_hook("session-end", payload("SessionEnd", writer, reason="other"), env)  # warm caches
    assert wait_for(lambda: fact_count(isolated_home / "memory.db") == 2)
    writer.exchange(3, topic="payments")
    times = []
    for _ in range(3):
        proc, took = run_hook("session-end", payload("SessionEnd", writer, reason="prompt_input_exit"), env)
        assert proc.returncode == 0
        times.append(took)
    assert sorted(times)[1] < 0.5, times
    assert wait_for(lambda: fact_count(isolated_home / "memory.db") == 5)


def test_session_start_gives_a_short_brief_with_topics_and_how_to_query(tmp_path, env, isolated_home):
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    writer.exchange(3)
    run_hook("session-end", payload("SessionEnd", writer), env)
    assert wait_for(lambda: fact_count(isolated_home / "memory.db") == 3)
    proc, _ = run_hook("session-start", payload("SessionStart", writer, source="startup"), env)
    assert proc.returncode == 0
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    brief = out["additionalContext"]
    assert "Billing rules" in brief and "query_memory" in brief and len(brief) <= 2500


def test_session_start_warns_when_extraction_is_paused(tmp_path, env, isolated_home):
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC")}
    env["PATH"] = "/usr/bin:/bin"  # no claude CLI either
    proc, _ = run_hook("session-start", payload("SessionStart", writer, source="startup"), env)
    brief = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "extraction is paused" in brief


def test_the_brief_can_be_turned_off_in_config(tmp_path, env, isolated_home):
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text("[brief]\nenabled = false\n")
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    proc, _ = run_hook("session-start", payload("SessionStart", writer, source="startup"), env)
    assert proc.returncode == 0 and proc.stdout == b""


@pytest.mark.parametrize("garbage", [b"", b"not json", b"[1,2]", b'{"transcript_path": 7}',
                                     bytes(range(256))])
def test_garbage_on_stdin_never_fails_the_session(garbage, env):
    unit = startup_seconds()
    for name in ("stop", "session-end", "session-start", "user-prompt"):
        proc, took = run_hook(name, garbage, env)
        assert proc.returncode == 0 and proc.stderr == b""
        for _ in range(2):  # over the bound: a load spike passes on a second look, a slow hook not
            if took < HOOK_STARTUPS[name] * unit:
                break
            unit = startup_seconds()
            proc, again = run_hook(name, garbage, env)
            assert proc.returncode == 0 and proc.stderr == b""
            took = min(took, again)
        assert took < HOOK_STARTUPS[name] * unit, (name, took, unit)


def test_a_corrupt_config_falls_back_to_defaults_and_says_so(tmp_path, env, isolated_home):
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text("[ingestion\nbatch_size = = 3")
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    proc, _ = run_hook("session-start", payload("SessionStart", writer, source="startup"), env)
    assert proc.returncode == 0
    assert "config" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_lores_own_nested_claude_child_is_ignored(tmp_path, env, isolated_home):
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    writer.exchange(8)
    env["LORE_DISABLE"] = "1"
    for name in ("stop", "session-end", "session-start"):
        proc, _ = run_hook(name, payload("Stop", writer), env)
        assert proc.returncode == 0 and proc.stdout == b""
    assert no_worker_started(isolated_home)
    assert not (isolated_home / "memory.db").exists()


def test_a_worker_finding_the_lock_held_leaves_the_work_to_the_holder(tmp_path, env, isolated_home):
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    writer.exchange(2)
    lock = transcript_lock(isolated_home / "locks", str(writer.path))
    assert lock.try_acquire()
    subprocess.run([PYTHON, "-m", "lore_plugin.worker", "ingest", str(writer.path)], env=env,
                   timeout=60, check=True)
    assert fact_count(isolated_home / "memory.db") == 0
    lock.release()
    subprocess.run([PYTHON, "-m", "lore_plugin.worker", "ingest", str(writer.path)], env=env,
                   timeout=60, check=True)
    assert fact_count(isolated_home / "memory.db") == 2


def first_run(projects: Path) -> None:
    """Lore's first run, before the test's transcripts exist: they are not history."""
    from lore_plugin.capture.history import record_if_first_run
    from lore_plugin.core.config import load_settings

    assert record_if_first_run(load_settings(), projects) == 0


def test_the_session_start_sweep_picks_up_stale_tails_left_by_crashed_sessions(tmp_path, env, isolated_home):
    projects = tmp_path / "home" / ".claude" / "projects"
    first_run(projects)
    crashed = TranscriptWriter(projects / "-work-project-a" / "crashed.jsonl")
    crashed.exchange(3)
    old = time.time() - 3600
    os.utime(crashed.path, (old, old))
    fresh = TranscriptWriter(projects / "-work-project-a" / "live.jsonl", session="live")
    fresh.exchange(2, topic="search")  # still being written by a live session: left alone
    new = TranscriptWriter(projects / "-work-project-a" / "new.jsonl", session="new")
    run_hook("session-start", payload("SessionStart", new, source="startup"), env)
    assert wait_for(lambda: fact_count(isolated_home / "memory.db") == 3)
    assert wait_for(lambda: workers_idle(isolated_home))  # the sweep is over, not just late
    assert fact_count(isolated_home / "memory.db") == 3


def test_the_sweep_still_consolidates_when_extraction_is_paused(tmp_path, env, isolated_home):
    from lore_plugin.recall.memory import Memory

    memory = Memory(isolated_home / "memory.db", None)
    memory.store("Topic", "Topic", depth=0)
    memory.close()
    projects = tmp_path / "home" / ".claude" / "projects"
    first_run(projects)
    stale = TranscriptWriter(projects / "-work-project-a" / "stale.jsonl")
    stale.exchange(2)
    old = time.time() - 3600
    os.utime(stale.path, (old, old))
    env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC")}
    env["PATH"] = "/usr/bin:/bin"  # no LLM at all
    subprocess.run([PYTHON, "-m", "lore_plugin.worker", "sweep", "--projects", str(projects)],
                   env=env, timeout=120, check=True)
    store = Store(isolated_home / "memory.db")
    assert store.last_consolidation() is not None  # ran, with the LLM phases skipped
    assert store.watermark(str(stale.path)) == 0  # the unread tail waits for an LLM
