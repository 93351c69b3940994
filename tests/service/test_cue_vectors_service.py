"""Cue vectors through the real memory service (issue 30): a note stored with cues gets its
cue vectors from the service's writer once the store is placed (after its answer, never
before), and notes given cues while no service ran are filled at its warm-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.cue_vectors import decode
from lore_plugin.store import Store
from tests.service.test_service import client, home, model_dir
from tests.service_running import wait_until

__all__ = ["home", "model_dir"]  # the fixtures, shared with test_service

CUES = ["dashboard charting library choice", "which library draws the graphs"]


def filled(db: Path, ids: list[str]) -> dict[str, bytes]:
    reader = Store(db, readonly=True)
    try:
        return reader.cue_vectors(ids)
    finally:
        reader.close()


def stored(home: Path, content: str, summary: str) -> str:
    answer: dict[str, Any] = client(home).request("tool", {"name": "store_memory", "arguments": {
        "content": content, "summary": summary, "cues": CUES}})
    assert not answer["isError"], answer
    return str(answer["structuredContent"]["id"])


def test_each_note_stored_with_cues_through_the_service_gets_its_cue_vectors(home: Path):
    db = home.parent / "memory.db"
    first = stored(home, "The web app's dashboard draws its charts with Apache ECharts 5.",
                   "Charting library of the dashboard")
    blobs = wait_until(lambda: filled(db, [first]), timeout=120, what="the cue vectors filled")
    assert decode(blobs[first]).shape == (2, 384)
    # The service is warm and its writer has looked once: this one is filled only because
    # the writer's batch had cues in it.
    second = stored(home, "The admin pages draw their charts with Chart.js 4.",
                    "Charting library of the admin pages")
    wait_until(lambda: filled(db, [second]), timeout=60, what="the second note's cue vectors")


def test_notes_given_cues_before_the_service_started_are_filled_once_it_starts(home: Path):
    db = home.parent / "memory.db"
    store = Store(db)
    try:  # as ingestion or an import with no model at hand would leave them: due
        ids = [store.insert(NewFragment(content=f"Shard {i} backs up at 0{i}:30.",
                                        summary=f"Backup time of shard {i}", depth=2,
                                        cues=f"when does shard {i} back up"), now=1.0)
               for i in range(3)]
        assert len(store.cue_vectors_due(10)) == 3
    finally:
        store.close()
    client(home).request("status")  # starts the service: its warm-up, or its writer when idle, fills them
    blobs = wait_until(lambda: len(got := filled(db, ids)) == 3 and got, timeout=120,
                       what="the cue vectors filled at start")
    assert all(decode(b).shape == (1, 384) for b in blobs.values())
