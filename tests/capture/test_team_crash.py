"""Exactly once across two databases (issue 29): a worker killed between the team space's
commit and the local file's re-extracts the slice on its next run; the team's part is not
written again (its own watermark is past the slice) and the local part is written once."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter

from lore_plugin.capture import jobs
from lore_plugin.hub import HubStore
from lore_plugin.store import Store
from tests.conftest import PYTHON, python_env
from tests.fake_anthropic import FakeAnthropic
from tests.team_api import TeamModel, make_repo
from tests.transcripts import TranscriptWriter

SHARED = ["Platform API handlers return problem+json", "Platform API tests need compose up"]
LOCAL = ["I prefer short commit messages"]


def counts(rows) -> Counter:
    return Counter(r["summary"].split(" #")[0] for r in rows if r["depth"] >= 2)


def test_a_worker_killed_after_the_team_commit_writes_nothing_twice(tmp_path, isolated_home,
                                                                   hub_url, hub_space):
    isolated_home.mkdir(parents=True)
    repo = make_repo(tmp_path / "repo", space=hub_space.space)
    writer = TranscriptWriter(tmp_path / "t.jsonl", cwd=str(repo))
    writer.user(f"Please note: stated/project: {SHARED[0]}. Also observed/project: {SHARED[1]}.")
    writer.assistant("Noted.", tool=False)
    writer.user(f"And stated/personal: {LOCAL[0]}.")
    writer.assistant("Noted.", tool=False)
    home = str(isolated_home)
    with FakeAnthropic(TeamModel(tag_requests=True)) as api:
        env = python_env(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url,
                         HOME=str(tmp_path / "home"), LORE_HUB_URL=hub_url,
                         LORE_HUB_SPACE="local")
        drain = [PYTHON, "-m", "lore_plugin.worker", "drain"]
        jobs.enqueue(home, ["ingest", str(writer.path)])
        crashed = subprocess.run(drain, env={**env, "LORE_CRASH_AT": "after-commit:1"},
                                 timeout=120, capture_output=True)
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr.decode()[-2000:]
        assert counts(hub_space.export_fragments()) == Counter(SHARED)  # the team's part is in
        jobs.enqueue(home, ["ingest", str(writer.path)])
        subprocess.run(drain, env=env, timeout=120, check=True, capture_output=True)
    team = HubStore(hub_url, hub_space.space)
    try:
        assert counts(team.export_fragments()) == Counter(SHARED)  # not written twice
    finally:
        team.close()
    store = Store(isolated_home / "memory.db")
    try:
        assert counts(store.export_fragments()) == Counter(LOCAL)  # written once, nothing lost
        assert store.watermark(str(writer.path)) == writer.path.stat().st_size
    finally:
        store.close()
