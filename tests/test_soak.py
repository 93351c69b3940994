"""Eight processes on one database at once for 30 s (LORE_SOAK_SECS): three MCP servers
storing and querying, two ingestion workers on growing transcripts, two CLI users, and
consolidation. No error reaches a user, no write is lost, nothing is duplicated, and the
database is intact at the end."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter

import pytest

from lore_plugin.embedding.embedder import assemble_from_packages
from lore_plugin.store import Store
from tests.conftest import MODEL_CACHE, PYTHON, ROOT, python_env
from tests.fake_anthropic import FakeAnthropic
from tests.knowledge_api import KnowledgeModel

SECONDS = float(os.environ.get("LORE_SOAK_SECS", "30"))
ROLES = [("mcp", "m1"), ("mcp", "m2"), ("mcp", "m3"), ("ingest", "alpha"), ("ingest", "beta"),
         ("cli", "c1"), ("cli", "c2"), ("consolidate", "cons")]


READY_WITHIN = 240.0  # seconds for every role to be up, on a loaded machine


def say_go_when_ready(gate, procs) -> None:
    """Starts the soak's clock once every role is ready, so all share the same 30 s."""
    give_up = time.time() + READY_WITHIN
    while len(list(gate.glob("*.ready"))) < len(ROLES):
        assert all(p.poll() is None for p in procs), "a role died before it was ready"
        assert time.time() < give_up, f"only {sorted(gate.glob('*.ready'))} got ready"
        time.sleep(0.1)
    tmp = gate / "go.tmp"
    tmp.write_text(repr(time.time()))
    tmp.replace(gate / "go")


@pytest.mark.slow
def test_eight_processes_share_one_database_without_errors_losses_or_duplicates(tmp_path, isolated_home):
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text(
        "[ingestion]\nretry_backoff_secs = 0\nmax_requests_per_hour = 100000\n"
        "[consolidation]\ninterval_secs = 1\n")
    model = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    with FakeAnthropic(KnowledgeModel()) as api:
        env = python_env(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url,
                         LORE_EMBED_MODEL_DIR=str(model), LORE_NO_DOWNLOAD="1")
        gate = tmp_path / "gate"
        gate.mkdir()
        procs = []
        for role, name in ROLES:
            args = [PYTHON, str(ROOT / "tests" / "soak_driver.py"), role, name, str(SECONDS),
                    str(tmp_path / f"{name}.jsonl")]
            if role == "ingest":
                args.append(str(tmp_path / "transcripts" / f"{name}.jsonl"))
            procs.append(subprocess.Popen(args, env=env, cwd=tmp_path))
        say_go_when_ready(gate, procs)
        for proc in procs:
            assert proc.wait(timeout=SECONDS + 240) == 0
    records = [json.loads(line) for _, name in ROLES if (tmp_path / f"{name}.jsonl").exists()
               for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
    errors = [r["error"] for r in records if "error" in r]
    assert errors == []
    stored = Counter(r["stored"] for r in records if "stored" in r)
    print(f"soak: {len(stored)} writes by {len(ROLES)} processes in {SECONDS:.0f} s, "
          f"{len(errors)} errors")  # shown with pytest -s; the README quotes a full run
    assert len(stored) > 50 and all(c == 1 for c in stored.values())
    store = Store(isolated_home / "memory.db")
    in_db = Counter(r[0] for r in store.execute("SELECT summary FROM fragments"))
    missing = [s for s in stored if in_db[s] == 0]
    duplicated = [s for s in stored if in_db[s] > 1]
    assert missing == [] and duplicated == []
    assert store.integrity_check() == ["ok"] and store.fts_consistent()
    assert store.orphan_edges() == [] and store.dangling_supersessions() == []
