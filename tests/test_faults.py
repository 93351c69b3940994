"""Faults a real machine produces: an unwritable or missing ~/.lore, a full disk, a database
left locked by a dead process, a corrupt or future database. Each ends in a clear message
and a safe state, never a lost write or a traceback in a hook."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import time

from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.embedder import assemble_from_packages
from lore_plugin.store import Store
from tests.conftest import MODEL_CACHE, PYTHON, python_env
from tests.fake_anthropic import FakeAnthropic
from tests.knowledge_api import KnowledgeModel
from tests.transcripts import TranscriptWriter


def hook(name: str, payload: dict, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "lore_plugin.hooks", name], input=json.dumps(payload).encode(),
                          env=env, capture_output=True, timeout=30)


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "lore_plugin.cli", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_an_unwritable_lore_home_never_breaks_a_hook_and_the_cli_says_why(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    env = python_env(LORE_HOME=str(blocker / "lore"), LORE_DB_PATH=str(blocker / "lore" / "memory.db"))
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    writer.exchange(30)
    for name in ("session-start", "stop", "session-end"):
        proc = hook(name, {"session_id": "s", "transcript_path": str(writer.path), "cwd": "/w"}, env)
        assert proc.returncode == 0 and proc.stderr == b""
    out = cli("remember", "--topic", "T", "text", env=env)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "memory database" in out.stderr or "Not a directory" in out.stderr


def test_a_missing_lore_home_is_created_on_first_use(tmp_path):
    home = tmp_path / "does" / "not" / "exist"
    env = python_env(LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"))
    assert cli("remember", "--topic", "T", "first memory", env=env).returncode == 0
    assert (home / "memory.db").exists() and (home / "logs" / "cli.log").exists()


FILE_LIMIT = 160_000  # the empty database and a few batches fit; all 40 turns do not


def _limit_file_size() -> None:
    # Python ignores SIGXFSZ, so exceeding the limit is an ordinary EFBIG write error:
    # what a full disk looks like to SQLite.
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def test_a_full_disk_fails_the_batch_without_losing_or_duplicating_it(tmp_path, isolated_home):
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    writer.exchange(40)
    db = isolated_home / "memory.db"
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text(
        "[ingestion]\nretry_backoff_secs = 0\nbatch_bytes = 20000\n")
    Store(db).close()
    with FakeAnthropic(KnowledgeModel()) as api:
        model = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
        env = python_env(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url,
                         LORE_EMBED_MODEL_DIR=str(model))
        cmd = [PYTHON, "-m", "lore_plugin.worker", "ingest", str(writer.path)]
        full = subprocess.run(cmd, env=env, capture_output=True, timeout=120, preexec_fn=_limit_file_size)
        assert full.returncode in (0, 1) and b"Traceback" not in full.stderr
        store = Store(db)
        partial = store.watermark(str(writer.path))
        assert 0 < partial < writer.path.stat().st_size  # some batches landed, the rest did not
        assert store.integrity_check() == ["ok"]
        store.close()
        subprocess.run(cmd, env=env, timeout=120, check=True)  # space is back
    store = Store(db)
    facts = [r[0] for r in store.execute("SELECT summary FROM fragments WHERE depth = 2")]
    assert sorted(facts) == sorted(f"billing rule {i} uses value {i * 7}" for i in range(40))
    assert store.watermark(str(writer.path)) == writer.path.stat().st_size


HOLD_WRITE_LOCK = """
import sys, time
from lore_plugin.embedding.embedder import assemble_from_packages
from lore_plugin.store import Store
from lore_plugin.core.types import NewFragment
store = Store(sys.argv[1])
store.conn.execute("BEGIN IMMEDIATE")
store.insert(NewFragment(content="never committed", summary="uncommitted", depth=0), now=1.0)
print("locked", flush=True)
time.sleep(60)
"""


def test_a_database_left_locked_by_a_dead_process_is_usable_and_lost_nothing_committed(tmp_path):
    db = tmp_path / "memory.db"
    store = Store(db)
    store.insert(NewFragment(content="committed before the crash", summary="committed", depth=0), now=1.0)
    holder = subprocess.Popen([PYTHON, "-c", HOLD_WRITE_LOCK, str(db)], env=python_env(),
                              stdout=subprocess.PIPE)
    assert holder.stdout.readline().strip() == b"locked"
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    started = time.monotonic()
    store.insert(NewFragment(content="after", summary="after", depth=0), now=2.0)
    assert time.monotonic() - started < 2.0  # the dead holder's lock went with it
    summaries = sorted(r[0] for r in store.execute("SELECT summary FROM fragments"))
    assert summaries == ["after", "committed"]
    assert store.integrity_check() == ["ok"]


def test_a_corrupt_database_file_gives_a_clear_message_and_hooks_still_exit_zero(tmp_path, isolated_home):
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "memory.db").write_bytes(b"this is not sqlite" * 1000)
    env = python_env()
    out = cli("topics", env=env)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "memory database" in out.stderr
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    proc = hook("session-start", {"session_id": "s", "transcript_path": str(writer.path), "cwd": "/w"}, env)
    assert proc.returncode == 0 and proc.stderr == b""
