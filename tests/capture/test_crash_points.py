"""Exactly once, step by step: the worker kills itself (SIGKILL, through LORE_CRASH_AT and
core/faults.py) at each named point of the queue → extraction → write → commit path, the
session goes on, and a second worker finishes the job. Every batch's knowledge is then
there once: none lost, none stored twice. test_kill.py kills at random times; this kills
exactly between two steps, where a misplaced commit would show."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter

import pytest

from lore_plugin.capture import jobs
from lore_plugin.core import faults
from lore_plugin.store import Store
from tests.conftest import PYTHON, python_env
from tests.fake_anthropic import FakeAnthropic
from tests.knowledge_api import KnowledgeModel
from tests.transcripts import TranscriptWriter

# The first batch (turns 0-1) makes a topic, a concept and two facts: four inserts; the
# second batch (turns 2-3) adds two facts to them.
POINTS = ["after-claim", "after-llm", "after-insert:1", "after-insert:2", "after-insert:3",
          "after-insert:4", "after-insert:6", "before-watermark", "before-watermark:2",
          "after-commit", "after-commit:2", "after-job"]
INSIDE_FIRST_WRITE = {"after-claim", "after-llm", "after-insert:1", "after-insert:2",
                      "after-insert:3", "after-insert:4", "before-watermark"}


def test_every_crash_point_in_the_code_is_exercised_here():
    assert {point.partition(":")[0] for point in POINTS} == set(faults.POINTS)


def fact_counts(store: Store) -> Counter:
    # Facts carry the id of the request that made them (" #3"): a batch extracted and stored
    # twice shows as two facts, though ingestion skips an identical summary.
    return Counter(r[0].split(" #")[0]
                   for r in store.execute("SELECT summary FROM fragments WHERE depth = 2"))


def rules(turns: range) -> set[str]:
    return {f"billing rule {i} uses value {i * 7}" for i in turns}


@pytest.mark.parametrize("point", POINTS)
def test_a_worker_killed_at_each_step_leaves_every_batch_stored_exactly_once(
        point, tmp_path, isolated_home):
    isolated_home.mkdir(parents=True)
    (isolated_home / "config.toml").write_text(
        "[ingestion]\nbatch_bytes = 2500\nretry_backoff_secs = 0\n")
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    for turn in range(4):
        writer.user(f"billing rule {turn} uses value {turn * 7}")
        writer.assistant(f"noted rule {turn}", tool=False)
    home = str(isolated_home)
    with FakeAnthropic(KnowledgeModel(tag_requests=True)) as api:
        env = python_env(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url,
                         HOME=str(tmp_path / "home"))
        drain = [PYTHON, "-m", "lore_plugin.worker", "drain"]
        jobs.enqueue(home, ["ingest", str(writer.path)])
        crashed = subprocess.run(drain, env={**env, "LORE_CRASH_AT": point}, timeout=60,
                                 capture_output=True)
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()[-2000:]
        store = Store(isolated_home / "memory.db")
        try:
            if point in INSIDE_FIRST_WRITE:  # nothing of an uncommitted write is visible
                assert store.execute("SELECT count(*) FROM fragments")[0][0] == 0
                assert store.watermark(str(writer.path)) == 0
            else:
                assert set(fact_counts(store)) >= rules(range(2))
        finally:
            store.close()
        writer.user("billing rule 4 uses value 28")  # the session goes on meanwhile
        writer.assistant("noted rule 4", tool=False)
        jobs.enqueue(home, ["ingest", str(writer.path)])
        subprocess.run(drain, env=env, timeout=60, check=True, capture_output=True)
    store = Store(isolated_home / "memory.db")
    try:
        facts = fact_counts(store)
        assert set(facts) == rules(range(5))
        assert [f for f, n in facts.items() if n > 1] == []
        assert store.watermark(str(writer.path)) == writer.path.stat().st_size
        assert store.execute("SELECT depth, count(*) FROM fragments WHERE depth < 2 "
                             "GROUP BY depth") == [(0, 1), (1, 1)]  # one topic, one concept
        assert store.integrity_check() == ["ok"] and store.fts_consistent()
    finally:
        store.close()
    assert jobs.waiting(home) == [] and list((isolated_home / "queue").iterdir()) == []
