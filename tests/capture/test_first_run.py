"""Lore's first run spends nothing unasked (issue 15): the transcripts that exist when Lore
first runs are history, which the hooks and the sweep never read; `lore ingest` estimates
what backfilling it costs, asks, and reads it once. Everything runs as Claude Code runs it:
scripts/lore-launch, real hook subprocesses, detached workers, a fake API on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from lore_plugin.store import Store
from tests.conftest import PYTHON, ROOT, python_env
from tests.fake_anthropic import FakeAnthropic
from tests.hooks.test_hooks import wait_for as wait
from tests.knowledge_api import prompt_text
from tests.transcripts import TranscriptWriter

LAUNCH = ROOT / "scripts" / "lore-launch"


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """A scratch HOME where Claude Code has been used for a while before Lore arrives."""
    home = tmp_path / "home"
    old = time.time() - 30 * 86400
    for project, n in (("-work-legacy", 3), ("-work-archive", 2)):
        writer = TranscriptWriter(home / ".claude" / "projects" / project / f"{project}.jsonl",
                                  cwd="/work/" + project[6:], session=f"old{project}")
        writer.exchange(n, topic="legacy" if n == 3 else "archive")
        os.utime(writer.path, (old, old))  # a stale unread tail, to the old sweep
    return home


def launch_env(home: Path, api: FakeAnthropic) -> dict[str, str]:
    env = python_env(HOME=str(home), LORE_PYTHON=PYTHON, ANTHROPIC_API_KEY="test-key",
                     ANTHROPIC_BASE_URL=api.url, LORE_BATCH_SIZE="5")
    for name in ("LORE_HOME", "LORE_DB_PATH"):  # the installed default: ~/.lore
        env.pop(name, None)
    return env


def hook(name: str, payload: dict, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(LAUNCH), "hook", name], input=json.dumps(payload).encode(),
                          env=env, capture_output=True, timeout=60)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LAUNCH), "cli", *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)


def wait_for(condition) -> bool:
    return wait(condition, timeout=90.0)  # workers start through the launcher: allow more


def facts(db: Path) -> list[str]:
    if not db.exists():
        return []
    store = Store(db, readonly=True)
    try:
        return sorted(r[0] for r in store.execute(
            "SELECT summary FROM fragments WHERE depth = 2"))
    finally:
        store.close()


def worker_done(home: Path, job: str, count: int) -> bool:
    log = home / ".lore" / "logs" / "worker.log"
    return log.exists() and log.read_text().count(f"{job} done") >= count


def asked_about(api: FakeAnthropic, word: str) -> int:
    return sum(word in prompt_text(r) for r in api.messages)


def test_history_is_never_read_by_the_hooks_and_lore_ingest_backfills_it_once(home, api):
    env = launch_env(home, api)
    db = home / ".lore" / "memory.db"
    writer = TranscriptWriter(home / ".claude" / "projects" / "-work-project-a" / "new.jsonl",
                              session="new-session")
    payload = {"session_id": writer.session, "transcript_path": str(writer.path),
               "cwd": writer.cwd}

    start = hook("session-start", {**payload, "hook_event_name": "SessionStart",
                                   "source": "startup"}, env)
    assert start.returncode == 0
    brief = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "2 transcript(s) from before it was installed" in brief and "lore ingest" in brief
    assert wait_for(lambda: worker_done(home, "sweep", 1))

    writer.exchange(6)  # the new session: a batch is due at the Stop hook
    assert hook("stop", {**payload, "hook_event_name": "Stop"}, env).returncode == 0
    assert wait_for(lambda: len(facts(db)) == 6)
    writer.exchange(2, topic="payments")
    assert hook("session-end", {**payload, "hook_event_name": "SessionEnd",
                                "reason": "other"}, env).returncode == 0
    assert wait_for(lambda: len(facts(db)) == 8)
    again = hook("session-start", {**payload, "hook_event_name": "SessionStart",
                                   "source": "resume"}, env)
    assert "before it was installed" not in again.stdout.decode()  # said once
    assert wait_for(lambda: worker_done(home, "sweep", 2))

    assert asked_about(api, "legacy") == 0 and asked_about(api, "archive") == 0
    assert asked_about(api, "billing") >= 1 and asked_about(api, "payments") >= 1
    status = cli(env, "status").stdout
    assert "2 of 2 transcript(s) unread" in status

    sent = len(api.messages)
    preview = cli(env, "ingest")
    assert preview.returncode == 0, preview.stderr
    assert "2 with history from before Lore's first run" in preview.stdout
    assert "2 transcript(s), 10 turns in 2 extraction call(s) to claude-haiku-4-5" in preview.stdout
    assert "input and" in preview.stdout and "$" in preview.stdout
    assert "nothing was sent" in preview.stdout and len(api.messages) == sent

    done = cli(env, "ingest", "--yes")
    assert done.returncode == 0, done.stderr
    assert asked_about(api, "legacy") == 1 and asked_about(api, "archive") == 1
    legacy = [f for f in facts(db) if f.startswith(("legacy", "archive"))]
    assert len(legacy) == 5
    assert "nothing to ingest" in cli(env, "ingest", "--yes").stdout
    assert len(api.messages) == sent + 2 and len(facts(db)) == 13
    assert "all ingested" in cli(env, "status").stdout
