"""The MCP tools with a hub (issue 28), through the real server subprocess: store_memory
writes to the routed hub space, query_memory's results each carry their space, and a hub
that is down is named in the answer while the local file still answers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore
from lore_plugin.store import Store
from tests.server.test_server import model_dir, running  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def local_fact(db: Path, summary: str) -> str:
    store = Store(db)
    fid = store.insert(NewFragment(content=summary, summary=summary, depth=0), now=1.7e9)
    store.close()
    return fid


async def test_stores_go_to_the_routed_space_and_results_name_their_space(
        tmp_path: Path, hub_url: str, model_dir: Path, monkeypatch) -> None:  # noqa: F811
    space = f"t{os.urandom(6).hex()}"
    HubStore(hub_url, space, create_space=True).close()
    monkeypatch.setenv("LORE_HUB_URL", hub_url)
    monkeypatch.setenv("LORE_HUB_SPACE", space)
    (tmp_path / "project").mkdir()
    db = tmp_path / "memory.db"
    kept_here = local_fact(db, "Invoices are stored in PostgreSQL 16 by the billing service")

    async with running(db, tmp_path / "project", model_dir) as lore:
        _, stored = await lore.ok("store_memory", content="The gateway deploys with helm on "
                                  "Tuesdays", summary="Gateway deploys with helm", depth=0)
        text, found = await lore.ok("query_memory", topic="gateway helm deploys", depth=0)
        _, invoices = await lore.ok("query_memory", topic="where are invoices stored", depth=0)

    hub = HubStore(hub_url, space)
    assert hub.has_fragment(stored["id"])
    hub.close()
    assert not Store(db).has_fragment(stored["id"])
    assert found["fragments"][0]["id"] == stored["id"]
    assert found["fragments"][0]["space"] == space and f"(space: {space})" in text
    assert invoices["fragments"][0]["id"] == kept_here
    assert invoices["fragments"][0]["space"] == "local"


async def test_a_hub_that_is_down_is_named_and_the_local_file_answers(
        tmp_path: Path, model_dir: Path, monkeypatch) -> None:  # noqa: F811
    monkeypatch.setenv("LORE_HUB_URL", f"postgresql://postgres@/postgres?host={tmp_path}/none")
    monkeypatch.setenv("LORE_HUB_SPACE", "personal")
    (tmp_path / "project").mkdir()
    db = tmp_path / "memory.db"
    kept_here = local_fact(db, "Invoices are stored in PostgreSQL 16 by the billing service")

    async with running(db, tmp_path / "project", model_dir) as lore:
        text, found = await lore.ok("query_memory", topic="where are invoices stored", depth=0)
        refused = await lore.error("store_memory", content="x y z", summary="x y z", depth=0)

    assert found["fragments"][0]["id"] == kept_here
    assert "personal" in found["unreachable"] and "Not reached" in text
    assert "cannot connect to the hub" in refused
