"""Exactly once under SIGKILL: the ingestion worker is killed at random points 100 times
while the session keeps growing; after a final run every batch's knowledge is there once.
Each kill waits for the worker's first LLM request, so it lands in the work (the answer, the
embedding, the write) rather than in the interpreter's start-up. test_crash_points.py kills
at each named step; this one keeps the steps nobody named."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter

import pytest

from lore_plugin.store import Store
from tests.conftest import PYTHON, python_env, wait_for
from tests.fake_anthropic import FakeAnthropic
from tests.knowledge_api import KnowledgeModel
from tests.transcripts import TranscriptWriter

KILLS = int(os.environ.get("LORE_KILL_RUNS", "100"))


@pytest.mark.slow
def test_sigkilled_workers_never_lose_or_duplicate_knowledge(tmp_path, isolated_home):
    rng = random.Random(7731)
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text(
        "[ingestion]\nbatch_bytes = 2500\nretry_backoff_secs = 0\nmax_requests_per_hour = 100000\n")
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    # Facts carry the id of the request that made them, so a batch extracted and stored twice
    # shows up as two facts even though ingestion skips an identical summary.
    with FakeAnthropic(KnowledgeModel(tag_requests=True)) as api:
        env = python_env(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url)
        cmd = [PYTHON, "-m", "lore_plugin.worker", "ingest", str(writer.path)]
        turn = 0
        killed_mid_work = 0
        for _ in range(KILLS):
            for _ in range(rng.randint(1, 3)):  # the session keeps talking between runs
                writer.user(f"billing rule {turn} uses value {turn * 7}")
                writer.assistant(f"noted rule {turn}", tool=False)
                turn += 1
            asked = len(api.messages)
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            assert wait_for(lambda p=proc, n=asked: len(api.messages) > n or p.poll() is not None)
            time.sleep(rng.uniform(0.0, 0.4))  # somewhere in what follows the request
            if proc.poll() is None:
                killed_mid_work += 1  # it had asked the LLM, and it had not finished
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        subprocess.run(cmd, env=env, timeout=120, check=True)
    store = Store(isolated_home / "memory.db")
    facts = Counter(r[0].split(" #")[0]
                    for r in store.execute("SELECT summary FROM fragments WHERE depth = 2"))
    expected = {f"billing rule {i} uses value {i * 7}" for i in range(turn)}
    assert set(facts) == expected
    assert all(count == 1 for count in facts.values()), [f for f, c in facts.items() if c > 1]
    assert store.watermark(str(writer.path)) == writer.path.stat().st_size
    assert store.integrity_check() == ["ok"] and store.fts_consistent()
    assert killed_mid_work >= KILLS // 2  # most kills landed while the worker was running
