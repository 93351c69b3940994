"""Lore's files are owner-only whatever the user's umask: a whole cycle through the real entry
points under umask 022, the repair of an install made before, the export's temporary file,
the nested `claude -p`'s folder, and `lore doctor`."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from lore_plugin.core import private
from lore_plugin.core.config import load_settings
from lore_plugin.llm.claude_cli import ClaudeCliLLM
from lore_plugin.llm.client import pick_llm
from lore_plugin.maintenance.operations import doctor, export
from lore_plugin.recall.memory import Memory
from tests.conftest import PYTHON, python_env
from tests.hooks.test_hooks import TRANSCRIPT, fact_count, payload, wait_for
from tests.transcripts import TranscriptWriter


def umask_022() -> None:
    os.umask(0o022)


def run(args: list[str], env: dict, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", *args], input=stdin, env=env, capture_output=True,
                          timeout=120, preexec_fn=umask_022)


def open_to_others(root: Path) -> list[str]:
    found = []
    for path in [root, *root.rglob("*")]:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:  # a WAL or lock file a background process just removed
            continue
        if not stat.S_ISLNK(mode) and mode & 0o077:
            found.append(f"{path.relative_to(root)} {stat.filemode(mode)}")
    return found


@pytest.fixture()
def home_memory(isolated_home, embedder):
    """A memory at the database the settings name, with one topic in it."""
    settings = load_settings()
    mem = Memory(settings.db_path, embedder)
    mem.store("Deploys go out on Tuesdays", "deploy day", parent_id=None, depth=0)
    mem.close()
    return settings


def test_a_whole_cycle_under_umask_022_leaves_nothing_readable_by_others(tmp_path, isolated_home, api):
    env = python_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=api.url,
                     LORE_HOME=str(isolated_home), LORE_DB_PATH=str(isolated_home / "memory.db"),
                     LORE_BATCH_SIZE="5", HOME=str(tmp_path / "home"))
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    assert run(["lore_plugin.hooks", "session-start"], env,
               json.dumps(payload("SessionStart", writer, source="startup")).encode()).returncode == 0
    writer.exchange(6)  # after SessionStart: what exists before Lore's first run is history
    assert run(["lore_plugin.hooks", "stop"], env,
               json.dumps(payload("Stop", writer)).encode()).returncode == 0
    assert wait_for(lambda: fact_count(isolated_home / "memory.db") == 6)
    out = tmp_path / "backup.jsonl"
    for args in (["query", "alpha rule"], ["consolidate", "--force"], ["export", str(out)],
                 ["status"], ["doctor"]):
        done = run(["lore_plugin.cli", *args], env)
        assert done.returncode == 0, (args, done.stderr)
    made = {p.name for p in isolated_home.rglob("*")}
    assert {"memory.db", "cli.log", "worker.log", "hooks.log", "locks"} - made <= {"hooks.log"}, made
    assert open_to_others(isolated_home) == []
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_an_install_made_under_umask_022_is_repaired_at_session_start(tmp_path, isolated_home, api):
    for folder in (isolated_home, isolated_home / "logs", isolated_home / "locks"):
        folder.mkdir(mode=0o755, exist_ok=True)
        os.chmod(folder, 0o755)
    for name in ("memory.db", "memory.db-wal", "llm_budget.json", "logs/worker.log", "locks/a.lock"):
        (isolated_home / name).write_text("x")
        os.chmod(isolated_home / name, 0o644)
    os.remove(isolated_home / "memory.db")
    os.remove(isolated_home / "memory.db-wal")
    env = python_env(LORE_HOME=str(isolated_home), LORE_DB_PATH=str(isolated_home / "memory.db"),
                     HOME=str(tmp_path / "home"), ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url)
    assert open_to_others(isolated_home)
    writer = TranscriptWriter(tmp_path / TRANSCRIPT)
    writer.exchange(1)
    done = run(["lore_plugin.hooks", "session-start"], env,
               json.dumps(payload("SessionStart", writer, source="startup")).encode())
    assert done.returncode == 0
    assert open_to_others(isolated_home) == []


def test_repair_keeps_the_owners_bits_and_leaves_symlinks_alone(tmp_path):
    home = tmp_path / "h"
    home.mkdir(mode=0o755)
    tool = home / "tool"
    tool.write_text("#!/bin/sh\n")
    os.chmod(tool, 0o755)
    outside = tmp_path / "someone-elses"
    outside.write_text("x")
    os.chmod(outside, 0o644)
    (home / "link").symlink_to(outside)
    private.repair(home)
    assert stat.S_IMODE(tool.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # not Lore's: never followed


def test_the_export_refuses_a_planted_symlink_at_its_temporary_name(tmp_path, home_memory):
    settings = home_memory
    out = tmp_path / "backup.jsonl"
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / f"backup.jsonl.tmp-{os.getpid()}").symlink_to(victim)
    with pytest.raises(FileExistsError):
        export(settings, out)
    assert victim.read_text() == "precious" and not out.exists()


def test_the_export_file_is_owner_only_under_umask_022(tmp_path, home_memory):
    old = os.umask(0o022)
    try:
        export(home_memory, tmp_path / "backup.jsonl")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "backup.jsonl").stat().st_mode) == 0o600


def test_the_nested_claude_never_runs_in_the_shared_temp_folder(tmp_path, isolated_home, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "claude").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "bin" / "claude", 0o700)
    guarded = pick_llm(load_settings())
    cli = guarded.inner  # type: ignore[attr-defined]
    assert isinstance(cli, ClaudeCliLLM)
    folder = Path(cli._cwd)
    assert folder.is_relative_to(isolated_home) and stat.S_IMODE(folder.stat().st_mode) == 0o700
    bare = ClaudeCliLLM("claude", "m", 1.0)
    assert stat.S_IMODE(Path(bare._cwd).stat().st_mode) == 0o700
    assert Path(bare._cwd) != Path("/tmp")


def test_doctor_reports_loose_modes_and_fix_repairs_them(tmp_path, isolated_home, home_memory):
    os.chmod(isolated_home, 0o755)
    (isolated_home / "logs").mkdir(exist_ok=True)
    (isolated_home / "logs" / "old.log").write_text("x")
    os.chmod(isolated_home / "logs" / "old.log", 0o644)
    settings = home_memory
    report = {f.check: f for f in doctor(settings)}["file modes"]
    assert not report.ok and "paths readable by others" in report.detail
    fixed = {f.check: f for f in doctor(settings, fix=True)}["file modes"]
    assert fixed.fixed
    assert {f.check: f for f in doctor(settings)}["file modes"].ok
    assert open_to_others(isolated_home) == []
