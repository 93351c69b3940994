"""Edits made in the viewer while the worker ingests a session and consolidation runs: every
edit and every extracted fact is there afterwards, once, with FTS and vectors in step."""

from __future__ import annotations

import signal
import subprocess
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest

from lore_plugin.embedding.embedder import from_blob
from lore_plugin.recall.memory import Memory, embedding_text
from lore_plugin.store import Store
from tests.conftest import PYTHON
from tests.fake_anthropic import FakeAnthropic
from tests.knowledge_api import KnowledgeModel
from tests.transcripts import TranscriptWriter
from tests.web.test_viewer import start_viewer, viewer_env

RULES = 80


@pytest.mark.slow
def test_viewer_edits_during_ingestion_and_consolidation_lose_nothing(tmp_path, embedder):
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    home.mkdir()
    (home / "config.toml").write_text("[ingestion]\nbatch_bytes = 1500\nretry_backoff_secs = 0\n"
                                      "max_requests_per_hour = 100000\n")
    memory = Memory(db, embedder)
    topic = memory.store("Notes the user keeps editing", "Editable notes", depth=0).id
    concept = memory.store("Things to edit", "Edit targets", parent_id=topic, depth=1).id
    targets = [memory.store(f"Original note {i}.", f"Original note {i}", parent_id=concept,
                            depth=2).id for i in range(12)]
    memory.close()
    writer = TranscriptWriter(tmp_path / "session.jsonl")
    for i in range(RULES):
        writer.user(f"billing rule {i} uses value {i * 7}")
        writer.assistant(f"noted rule {i}", tool=False)

    with FakeAnthropic(KnowledgeModel()) as api:
        env = viewer_env(home, db) | {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": api.url}
        proc, url = start_viewer(home, db)
        try:
            parts = urlsplit(url)
            client = httpx.Client(base_url=f"http://{parts.netloc}", timeout=120)
            assert client.get(f"/?{parts.query}").status_code == 303
            page = client.get(f"/fragment/{targets[0]}").text
            csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            ingest = subprocess.Popen([PYTHON, "-m", "lore_plugin.worker", "ingest",
                                       str(writer.path)], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            consolidate = subprocess.Popen([PYTHON, "-m", "lore_plugin.cli", "consolidate",
                                            "--force"], env=env, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
            edits: dict[str, str] = {}
            during = 0
            rounds = 0
            while ingest.poll() is None or consolidate.poll() is None or rounds < 2:
                for fid in targets:
                    text = f"Edited note {fid[:6]} round {rounds} marker zq{rounds}x{fid[:6]}"
                    busy = ingest.poll() is None or consolidate.poll() is None
                    done = client.post(f"/fragment/{fid}/edit",
                                       data={"csrf": csrf, "summary": text, "content": text})
                    assert done.status_code == 303, done.text
                    edits[fid] = text
                    during += busy
                rounds += 1
            assert ingest.wait(timeout=300) == 0 and consolidate.wait(timeout=300) == 0
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    assert during >= len(targets)  # a full round of edits overlapped the background work

    store = Store(db)
    try:
        for fid, text in edits.items():
            frag = store.get(fid)
            assert (frag.summary, frag.content) == (text, text)
            marker = text.rsplit(" ", 1)[1]
            assert [f.id for f, _ in store.keyword_search(f'"{marker}"', 5)] == [fid]
            expected = embedder.embed([embedding_text(text, text, "Edit targets")])[0]
            got = from_blob(store.embedding_of(fid))  # type: ignore[arg-type]
            assert float(np.dot(expected, got)) > 0.999
        facts = {r[0] for r in store.execute("SELECT summary FROM fragments WHERE depth = 2 "
                                             "AND summary LIKE 'billing rule %'")}
        assert facts == {f"billing rule {i} uses value {i * 7}" for i in range(RULES)}
        assert store.watermark(str(writer.path)) == writer.path.stat().st_size
        assert store.integrity_check() == ["ok"] and store.fts_consistent()
        assert store.last_consolidation() is not None
    finally:
        store.close()
