"""Cost the user can see and bound (issue 15), through the real hooks: every LLM call is in
the token ledger, a spent daily budget makes extraction wait without losing anything, and the
off switches (config, `lore pause`, ignored projects) keep transcripts unread."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from lore_plugin.llm.usage import day_start, next_day, price_of
from lore_plugin.store import Store
from tests.conftest import PYTHON, workers_idle
from tests.fake_anthropic import FakeAnthropic
from tests.hooks.test_hooks import fact_count, first_run, payload, run_hook, wait_for
from tests.knowledge_api import prompt_text
from tests.transcripts import TranscriptWriter


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "lore_plugin.cli", *args], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)


def ledger(db: Path) -> list[tuple]:
    if not db.exists():
        return []
    store = Store(db, readonly=True)
    try:
        return store.execute("SELECT purpose, project, model, input_tokens, output_tokens, "
                             "cost_usd FROM llm_usage ORDER BY id")
    finally:
        store.close()


def config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def projects_of(tmp_path: Path) -> Path:
    """Claude Code's projects folder in the scratch HOME: hooks accept transcripts only there."""
    return tmp_path / "home" / ".claude" / "projects"


def settle(home: Path) -> None:
    """Until every worker the hooks started has finished (see tests/conftest.py)."""
    assert wait_for(lambda: workers_idle(home))


def test_every_extraction_call_is_in_the_ledger_and_status_shows_the_spend(
        tmp_path, env, isolated_home, api):
    db = isolated_home / "memory.db"
    writer = TranscriptWriter(projects_of(tmp_path) / "-work-project-a" / "t.jsonl")
    writer.exchange(6)
    run_hook("stop", payload("Stop", writer), env)
    assert wait_for(lambda: fact_count(db) == 6)
    assert wait_for(lambda: len(ledger(db)) == 1)
    purpose, project, model, tokens_in, tokens_out, cost = ledger(db)[0]
    assert (purpose, project, model) == ("extraction", "/work/project-a", "claude-haiku-4-5")
    # The fake API reports input tokens as a quarter of the messages' JSON, output likewise.
    assert tokens_in == max(1, len(json.dumps(api.messages[0]["messages"])) // 4)
    assert tokens_out > 0
    per_in, per_out = price_of("claude-haiku-4-5")
    assert abs(cost - (tokens_in * per_in + tokens_out * per_out) / 1e6) < 1e-12
    out = cli(env, "status").stdout
    assert cost < 0.005  # a few hundred tokens
    assert f"today: 1 call, {tokens_in:,} in + {tokens_out:,} out tokens, <$0.01" in out
    assert "this month: 1 call," in out
    assert f"extraction: 1 call, {tokens_in:,} in + {tokens_out:,} out" in out
    assert f"daily budget: {tokens_in + tokens_out:,} of 2,000,000 tokens used" in out


def test_a_spent_daily_budget_makes_extraction_wait_and_nothing_is_lost(
        tmp_path, env, isolated_home, api):
    db = isolated_home / "memory.db"
    config(isolated_home, "[ingestion]\nmax_tokens_per_day = 50\n")
    first = TranscriptWriter(projects_of(tmp_path) / "-work-project-a" / "a.jsonl", session="a")
    first.exchange(6)
    run_hook("stop", payload("Stop", first), env)
    assert wait_for(lambda: fact_count(db) == 6)  # under the budget when it started
    spent = sum(r[3] + r[4] for r in ledger(db))
    assert spent >= 50

    second = TranscriptWriter(projects_of(tmp_path) / "-work-project-a" / "b.jsonl", session="b")
    second.exchange(6, topic="search")
    run_hook("stop", payload("Stop", second), env)
    run_hook("session-end", payload("SessionEnd", second), env)
    settle(isolated_home)
    assert wait_for(lambda: "budget" in (isolated_home / "logs" / "worker.log").read_text())
    assert len(api.messages) == 1 and fact_count(db) == 6
    store = Store(db, readonly=True)
    assert store.watermark(str(second.path)) == 0 and store.failures() == []  # no retry debt
    store.close()

    start = run_hook("session-start", payload("SessionStart", second, source="startup"), env)[0]
    brief = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    resume = time.strftime("%H:%M", time.localtime(next_day(time.time())))
    assert "daily token budget spent" in brief and f"resumes at {resume}" in brief
    assert "daily token budget spent" in cli(env, "status").stdout

    config(isolated_home, "[ingestion]\nmax_tokens_per_day = 1000000\n")  # a new day's room
    run_hook("session-end", payload("SessionEnd", second), env)
    assert wait_for(lambda: fact_count(db) == 12)  # the waiting batch, whole


def test_the_day_starts_at_local_midnight():
    now = time.time()
    start = day_start(now)
    assert start <= now < start + 90_000
    assert time.localtime(start)[3:6] == (0, 0, 0)
    assert time.localtime(next_day(now))[3:6] == (0, 0, 0) and next_day(now) > now


def _nothing_read(fake: FakeAnthropic, db: Path, writer: TranscriptWriter) -> None:
    assert all(writer.session not in prompt_text(r) and "billing" not in prompt_text(r)
               for r in fake.messages)
    assert fact_count(db) == 0
    if db.exists():
        store = Store(db, readonly=True)
        try:
            assert store.watermark(str(writer.path)) == 0
        finally:
            store.close()


def test_ingestion_turned_off_in_config_reads_nothing(tmp_path, env, isolated_home, api):
    config(isolated_home, "[ingestion]\nenabled = false\n")
    projects = tmp_path / "home" / ".claude" / "projects"
    first_run(projects)
    writer = TranscriptWriter(projects / "-work-project-a" / "t.jsonl")
    writer.exchange(6)
    old = time.time() - 3600
    os.utime(writer.path, (old, old))  # a stale tail the sweep would take
    run_hook("stop", payload("Stop", writer), env)
    run_hook("session-end", payload("SessionEnd", writer), env)
    start = run_hook("session-start", payload("SessionStart", writer, source="startup"), env)[0]
    assert "enabled = false" in json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    settle(isolated_home)
    _nothing_read(api, isolated_home / "memory.db", writer)
    assert "turned off in the config" in cli(env, "status").stdout


def test_lore_pause_stops_extraction_until_lore_resume(tmp_path, env, isolated_home, api):
    db = isolated_home / "memory.db"
    assert "extraction paused" in cli(env, "pause").stdout
    writer = TranscriptWriter(projects_of(tmp_path) / "-work-project-a" / "t.jsonl")
    writer.exchange(6)
    run_hook("stop", payload("Stop", writer), env)
    run_hook("session-end", payload("SessionEnd", writer), env)
    settle(isolated_home)
    _nothing_read(api, db, writer)
    assert "paused by `lore pause`" in cli(env, "status").stdout
    assert "extraction resumed" in cli(env, "resume").stdout
    run_hook("stop", payload("Stop", writer), env)
    assert wait_for(lambda: fact_count(db) == 6)


def test_an_ignored_project_is_never_read_by_hooks_or_the_sweep(tmp_path, env, isolated_home, api):
    db = isolated_home / "memory.db"
    projects = tmp_path / "home" / ".claude" / "projects"
    first_run(projects)
    secret = tmp_path / "clients" / "secret"
    marked = tmp_path / "work" / "private"
    (marked / "src").mkdir(parents=True)
    (marked / ".lore-ignore").write_text("")
    config(isolated_home, f'[ingestion]\nignore_projects = ["{tmp_path}/clients/*"]\n')
    old = time.time() - 3600
    writers = []
    for name, cwd in (("secret", secret), ("private", marked / "src")):
        writer = TranscriptWriter(projects / f"-{name}" / f"{name}.jsonl", cwd=str(cwd),
                                  session=f"session-{name}")
        writer.exchange(6)
        os.utime(writer.path, (old, old))
        writers.append(writer)
        run_hook("stop", payload("Stop", writer), env)
        run_hook("session-end", payload("SessionEnd", writer), env)
    run_hook("session-start", payload("SessionStart", writers[0], source="startup"), env)
    other = TranscriptWriter(projects / "-open" / "t.jsonl", cwd=str(tmp_path / "work" / "open"),
                             session="open")
    other.exchange(6, topic="search")  # a project that is not ignored still is read
    run_hook("stop", payload("Stop", other), env)
    assert wait_for(lambda: fact_count(db) == 6)
    settle(isolated_home)
    assert all("billing" not in prompt_text(r) for r in api.messages)
    store = Store(db, readonly=True)
    try:
        assert [store.watermark(str(w.path)) for w in writers] == [0, 0]
    finally:
        store.close()


def test_list_prices_are_found_by_model_family_and_unknown_models_have_none():
    from lore_plugin.llm.usage import Usage

    assert price_of("claude-haiku-4-5-20251001") == price_of("claude-haiku-4-5") == (1.0, 5.0)
    assert price_of("claude-opus-4-1-20250805") == (15.0, 75.0)
    assert price_of("claude-opus-4-5") == (5.0, 25.0)  # not taken for claude-opus-4
    assert price_of("haiku") is None and price_of("gpt-9") is None
    assert Usage(1_000_000, 100_000).cost("claude-haiku-4-5") == 1.5
    assert Usage(0, 0, cache_read_tokens=1_000_000).cost("claude-haiku-4-5") == 0.1
    assert Usage(10, 10, cost_usd=0.25).cost("gpt-9") == 0.25  # the CLI's own figure wins
    assert Usage(10, 10).cost("gpt-9") is None


def test_project_rules_match_paths_folders_below_them_and_globs(tmp_path):
    from lore_plugin.core.controls import project_ignored_values, transcript_cwd
    from tests.conftest import FIXTURES

    assert transcript_cwd(FIXTURES / "real_2.1.197_interactive_tui.jsonl") == \
        "/tmp/ccresearch/int1/proj"
    assert transcript_cwd(tmp_path / "missing.jsonl") is None
    rules = ["/work/secret", "~/clients/*"]
    assert project_ignored_values("/work/secret", rules)
    assert project_ignored_values("/work/secret/api", rules)
    assert not project_ignored_values("/work/secret2", rules)
    assert project_ignored_values(os.path.expanduser("~/clients/acme/web"), rules)
    assert not project_ignored_values(os.path.expanduser("~/client"), rules)
    assert not project_ignored_values(None, rules)
    (tmp_path / "repo" / "pkg").mkdir(parents=True)
    assert not project_ignored_values(str(tmp_path / "repo" / "pkg"), [])
    (tmp_path / "repo" / ".lore-ignore").write_text("")
    assert project_ignored_values(str(tmp_path / "repo" / "pkg"), [])
