"""store_memory's cues through a real stdio MCP client, the thin front with the memory
service and the in-process SDK server alike: kept beside the note, redacted, searched, never
shown; a malformed argument is refused in one line or cleaned."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lore_plugin.store import Store
from tests.server.test_server import anyio_backend, model_dir, path, running, text_of

__all__ = ["anyio_backend", "model_dir", "path"]  # fixtures, used by name
pytestmark = pytest.mark.anyio
SECRET = "AKIA" + "L0REFAKE7Q9Z2B4W"
CUES = ["boot the stack on my laptop", "which command for dev", f"dev key {SECRET}"]


def stored_cues(db: Path, fid: str, timeout: float = 60.0) -> str | None:
    """The row's cues once the store is placed (the service may answer before)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        store = Store(db, readonly=True)
        try:
            rows = store.execute("SELECT cues FROM fragments WHERE id = ?", (fid,))
        finally:
            store.close()
        if rows:
            return str(rows[0][0])
        time.sleep(0.2)
    return None


async def test_store_memory_keeps_cues_redacted_searchable_and_never_shown(
        tmp_path: Path, model_dir: Path, path: str):
    project = tmp_path / "atlas"
    project.mkdir()
    db = tmp_path / "memory.db"
    async with running(db, project, model_dir, path) as lore:
        _, data = await lore.ok("store_memory", summary="Running atlas locally", cues=CUES,
                                content="To run atlas locally use `make dev`; it starts the "
                                        "API on port 8080.")
        cues = stored_cues(db, data["id"])
        assert cues is not None and SECRET not in cues
        assert cues.splitlines()[:2] == CUES[:2] and "[REDACTED" in cues
        text, found = await lore.ok("query_memory", topic="boot the stack on my laptop",
                                    depth=2)
        assert found["fragments"][0]["id"] == data["id"]
        shown = text + json.dumps(found)  # the topic asked is echoed; the other cues never
        assert "which command" not in shown and "REDACTED" not in shown

        # A repeat in other words adds its cues to the note it repeats.
        _, again = await lore.ok("store_memory", summary="Running atlas locally",
                                 content="To run atlas locally use `make dev`; it starts the "
                                         "API on port 8080.", cues=["local setup for atlas"])
        assert again["id"] != data["id"] or again["duplicate"]
        deadline = time.monotonic() + 60
        while "local setup for atlas" not in (stored_cues(db, data["id"]) or ""):
            assert time.monotonic() < deadline, stored_cues(db, data["id"])
            time.sleep(0.2)
        assert stored_cues(db, data["id"]).splitlines()[:2] == CUES[:2]


@pytest.mark.parametrize(("cues", "expected"), [
    (7, "valid list"),
    (["fine", 3], "valid string"),
    ([f"phrase {i}" for i in range(1000)], "at most 8"),
    ({"a": "b"}, "valid list"),
])
async def test_a_malformed_cues_argument_gets_one_clear_line(
        tmp_path: Path, model_dir: Path, path: str, cues: object, expected: str):
    project = tmp_path / "p"
    project.mkdir()
    async with running(tmp_path / "memory.db", project, model_dir, path) as lore:
        message = await lore.error("store_memory", content="Deploys are on Thursdays.",
                                   summary="Deploy day", cues=cues)
        assert expected in message and "Traceback" not in message
        _, topics = await lore.ok("list_topics")
        assert topics["topics"] == []  # nothing stored by a refused call


async def test_cues_sent_as_a_json_string_or_one_phrase_are_read_as_a_list(
        tmp_path: Path, model_dir: Path, path: str):
    project = tmp_path / "p"
    project.mkdir()
    db = tmp_path / "memory.db"
    async with running(db, project, model_dir, path) as lore:
        _, one = await lore.ok("store_memory", content="Deploys are on Thursdays.",
                               summary="Deploy day", cues='["release cadence", "ship day"]')
        _, two = await lore.ok("store_memory", content="Invoices are kept seven years.",
                               summary="Invoice retention", cues="  how long   records stay ")
        assert stored_cues(db, one["id"]) == "release cadence\nship day"
        assert stored_cues(db, two["id"]) == "how long records stay"
        result = await lore.call("query_memory", topic="ship day", depth=2)
        assert not result.is_error and one["id"][:12] in text_of(result)
