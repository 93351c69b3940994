"""No process pile-ups (issue 15): however many hooks fire at once, at most max_workers
detached workers are alive, every transcript is ingested exactly once, and no worker is left
when the work is done."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import PYTHON, python_env
from tests.fake_anthropic import FakeAnthropic
from tests.hooks.test_hooks import fact_count, first_run, wait_for
from tests.knowledge_api import RULE, KnowledgeModel, conversation_text
from tests.transcripts import TranscriptWriter

CAP = 2
HOOKS = 50
# The processes are told apart by their environment, read from /proc.
pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc (Linux)")


def lore_workers(home: Path) -> list[int]:
    """This test's detached workers: python -m lore_plugin.worker with our LORE_HOME."""
    marker = f"LORE_HOME={home}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
            if b"lore_plugin.worker" not in cmdline:
                continue
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if marker in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


class Watcher(threading.Thread):
    """Samples the live workers every few milliseconds; `most` is the highest count seen."""

    def __init__(self, home: Path) -> None:
        super().__init__(daemon=True)
        self.home, self.most, self.samples = home, 0, 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.most = max(self.most, len(lore_workers(self.home)))
            self.samples += 1
            time.sleep(0.005)


def test_fifty_stop_hooks_at_once_never_run_more_workers_than_the_cap(tmp_path, isolated_home):
    home = isolated_home
    with FakeAnthropic(KnowledgeModel()) as api:
        env = python_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=api.url,
                         LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"),
                         LORE_BATCH_SIZE="3", HOME=str(tmp_path / "home"))
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(f"[ingestion]\nmax_workers = {CAP}\n")
        projects = tmp_path / "home" / ".claude" / "projects"  # where hooks accept transcripts
        first_run(projects)
        writers = []
        for i in range(HOOKS):
            writer = TranscriptWriter(projects / "-work-project-a" / f"s{i:02d}.jsonl",
                                      session=f"session-{i:02d}")
            writer.exchange(3, topic=f"topic{i:02d}")
            writers.append(writer)
        watcher = Watcher(home)
        watcher.start()
        hooks = [subprocess.Popen(
            [PYTHON, "-m", "lore_plugin.hooks", "stop"], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
            for _ in writers]
        for hook, writer in zip(hooks, writers):
            payload = (f'{{"session_id": "{writer.session}", "transcript_path": '
                       f'"{writer.path}", "cwd": "{writer.cwd}"}}').encode()
            hook.stdin.write(payload)
            hook.stdin.close()
        for hook in hooks:
            assert hook.wait(timeout=60) == 0 and hook.stderr.read() == b""
        db = home / "memory.db"
        done = wait_for(lambda: fact_count(db) == 3 * HOOKS, timeout=600)
        assert wait_for(lambda: not lore_workers(home), timeout=60)  # none outlives its work
        watcher.stop.set()
        watcher.join()
        assert done, f"{fact_count(db)} facts of {3 * HOOKS}"
        assert 0 < watcher.most <= CAP and watcher.samples > 100
        sent = Counter(t for r in api.messages
                       for t in {m[0] for m in RULE.findall(conversation_text(r))})
        assert sent == {f"topic{i:02d}": 1 for i in range(HOOKS)}  # each transcript sent once
        assert len(api.messages) == HOOKS
        assert not [n for n in os.listdir(home / "queue") if not n.startswith(".")]
