"""The thin front says exactly what the SDK server says before any tool runs: the same tool
list, the same initialize answer, from a tool_list.json that matches the SDK's definitions;
and it starts without the SDK, pydantic or numpy."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from lore_plugin.server.tool_list import PATH, generate
from tests.conftest import PYTHON, python_env
from tests.service_running import stop_service

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def session(tmp: Path, service: str) -> AsyncIterator[tuple[Client, Any]]:
    env = python_env(LORE_HOME=str(tmp / "home"), LORE_DB_PATH=str(tmp / "memory.db"),
                     LORE_NO_DOWNLOAD="1", LORE_SERVICE=service,
                     LORE_SERVICE_IDLE="20")  # a service started after the last check goes too
    env.pop("LORE_CONFIG", None)
    params = StdioServerParameters(command=PYTHON, args=["-m", "lore_plugin.server"], env=env,
                                   cwd=str(tmp))
    try:
        async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
            yield client, (client.protocol_version, client.server_info,
                           client.server_capabilities, client.instructions)
    finally:
        stop_service(tmp / "home")


def test_tool_list_json_is_what_the_sdk_definitions_generate():
    assert json.loads(PATH.read_text(encoding="utf-8")) == generate(), \
        "run `python -m lore_plugin.server.tool_list` to regenerate tool_list.json"


async def test_the_front_lists_the_same_tools_and_handshake_as_the_sdk_server(tmp_path: Path):
    answers = {}
    for service in ("on", "off"):
        (tmp_path / service).mkdir()
        async with session(tmp_path / service, service) as (client, init):
            tools = (await client.list_tools()).tools
            answers[service] = ([t.model_dump() for t in tools], init)
            assert (await client.list_prompts()).prompts == []
            assert (await client.list_resources()).resources == []
    assert answers["on"][0] == answers["off"][0]
    assert answers["on"][1] == answers["off"][1] and answers["on"][1][3]


def test_the_front_starts_without_the_sdk_pydantic_or_numpy(tmp_path: Path):
    code = ("import sys, json, io; import lore_plugin.server.front as f; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'mcp', 'pydantic', 'numpy', 'onnxruntime', 'apsw'})))")
    out = subprocess.run([PYTHON, "-c", code], env=python_env(LORE_HOME=str(tmp_path)),
                         capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [], out.stderr


def test_the_front_answers_bad_json_rpc_with_errors_and_keeps_serving(tmp_path: Path):
    lines = [b"not json", b'{"jsonrpc":"2.0","id":1,"method":"nope"}', b"[1,2]",
             b'{"jsonrpc":"2.0","id":2,"method":"ping"}']
    env = python_env(LORE_HOME=str(tmp_path / "home"), LORE_DB_PATH=str(tmp_path / "m.db"),
                     LORE_SERVICE_IDLE="20")
    out = subprocess.run([PYTHON, "-m", "lore_plugin.server"], input=b"\n".join(lines) + b"\n",
                         env=env, capture_output=True, timeout=60, cwd=tmp_path)
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert [a.get("error", {}).get("code") for a in answers] == [-32700, -32601, -32600, None]
    assert answers[-1] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    stop_service(tmp_path / "home")
