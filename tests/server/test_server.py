"""The MCP server, driven as a real subprocess through the SDK's stdio client, the way Claude
Code drives it, by both paths: the thin front with the memory service behind it ("service",
what a session runs) and the in-process SDK server ("in-process", LORE_SERVICE=off, the
fallback). One server and database are shared by most tests (each test uses its own names);
the multi-server tests start more servers beside it on the same database (with the service,
more fronts of the one service)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult

from lore_plugin.core.errors import NotFound
from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.embedder import assemble_from_packages
from lore_plugin.server.tools import BUSY_MESSAGE, MAX_CHARS, MAX_TOPICS, Service
from lore_plugin.service.engine import ToolFailure
from lore_plugin.store import BusyError, Store
from tests.conftest import MODEL_CACHE, PYTHON, python_env
from tests.service_running import stop_service

pytestmark = pytest.mark.anyio
TOOLS = {"query_memory", "explore_memory", "traverse_memory", "store_memory", "list_topics"}


@dataclass
class Running:
    client: Client
    db: Path

    async def call(self, tool: str, **args: Any) -> CallToolResult:
        return await self.client.call_tool(tool, args)

    async def ok(self, tool: str, **args: Any) -> tuple[str, dict[str, Any]]:
        result = await self.call(tool, **args)
        assert not result.is_error, text_of(result)
        assert result.structured_content is not None
        return text_of(result), result.structured_content

    async def error(self, tool: str, **args: Any) -> str:
        result = await self.call(tool, **args)
        assert result.is_error, f"{tool}({args}) should fail but said: {text_of(result)}"
        return text_of(result)


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def model_dir() -> Path:
    folder = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    assert folder is not None, "the embedding model packages must be installed"
    return folder


@asynccontextmanager
async def running(db: Path, cwd: Path, model_dir: Path, path: str = "service"
                  ) -> AsyncIterator[Running]:
    """`path`: "service" (the thin front and the home's memory service, stopped when the
    last front using it ends) or "in-process" (the SDK server, LORE_SERVICE=off)."""
    home = db.parent / "home"
    env = python_env(LORE_HOME=str(home), LORE_DB_PATH=str(db), LORE_EMBED_MODEL_DIR=str(model_dir),
                     LORE_NO_DOWNLOAD="1", LORE_SERVICE="on" if path == "service" else "off")
    env.pop("LORE_CONFIG", None)
    params = StdioServerParameters(command=PYTHON, args=["-m", "lore_plugin.server"],
                                   env=env, cwd=str(cwd))
    try:
        async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
            yield Running(client, db)
    finally:
        if path == "service" and not _fronts.get(home):
            stop_service(home)


_fronts: dict[Path, int] = {}  # fronts still open per home: the service stays while any is


@pytest.fixture(scope="module", params=["service", "in-process"])
def path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
async def lore(tmp_path_factory: pytest.TempPathFactory, model_dir: Path, path: str
               ) -> AsyncIterator[Running]:
    root = tmp_path_factory.mktemp("server")
    (root / "project").mkdir()
    _fronts[root / "home"] = 1
    try:
        async with running(root / "memory.db", root / "project", model_dir, path) as server:
            yield server
    finally:
        _fronts.pop(root / "home", None)
        if path == "service":
            stop_service(root / "home")


async def store(lore: Running, content: str, summary: str, parent: str | None = None,
                depth: int | None = None) -> str:
    args: dict[str, Any] = {"content": content, "summary": summary}
    if parent is not None:
        args["parent_id"] = parent
    args["depth"] = 0 if parent is None and depth is None else depth if depth is not None else 2
    _, data = await lore.ok("store_memory", **args)
    return str(data["id"])


# -- the tool list ----------------------------------------------------------------------
async def test_the_server_lists_exactly_the_five_tools_with_their_parameters(lore: Running):
    tools = {t.name: t for t in (await lore.client.list_tools()).tools}
    assert set(tools) == TOOLS

    def props(name: str) -> dict[str, Any]:
        return tools[name].input_schema["properties"]

    def required(name: str) -> set[str]:
        return set(tools[name].input_schema.get("required", []))

    query = props("query_memory")
    assert set(query) == {"topic", "depth", "limit"} and required("query_memory") == {"topic"}
    assert (query["depth"]["default"], query["depth"]["minimum"], query["depth"]["maximum"]) == (1, 0, 8)
    assert (query["limit"]["default"], query["limit"]["minimum"], query["limit"]["maximum"]) == (10, 1, 100)
    explore = props("explore_memory")
    assert set(explore) == {"topic", "max_depth"} and explore["max_depth"]["default"] == 2
    traverse = props("traverse_memory")
    assert set(traverse) == {"fragment_id", "direction"}
    assert required("traverse_memory") == {"fragment_id", "direction"}
    assert traverse["direction"]["enum"] == ["children", "parent", "associations"]
    stored = props("store_memory")
    assert set(stored) == {"content", "summary", "parent_id", "depth", "cues"}
    assert stored["cues"]["anyOf"][0]["maxItems"] == 8 and stored["cues"]["default"] is None
    assert required("store_memory") == {"content", "summary"}
    assert stored["parent_id"]["default"] is None and stored["depth"]["default"] == 2
    assert props("list_topics") == {}
    for tool in tools.values():
        assert tool.output_schema, f"{tool.name} publishes no output schema"
        assert all(p.get("description") for p in tool.input_schema["properties"].values())
    assert "start shallow" in tools["query_memory"].description.lower()
    assert "children" in tools["traverse_memory"].description


# -- a round trip -----------------------------------------------------------------------
async def test_stored_knowledge_is_recalled_explored_and_traversed(lore: Running):
    topic = await store(lore, "Rust async programming with tokio", "Rust async programming")
    concept = await store(lore, "Tokio runs futures on a multi-threaded, work-stealing runtime",
                          "tokio runtime model", parent=topic[:8], depth=1)
    fact = await store(lore, "spawn_blocking moves blocking work off the async worker threads",
                       "tokio spawn_blocking for blocking calls", parent=concept[:10], depth=2)

    text, data = await lore.ok("query_memory", topic="tokio runtime scheduler")
    assert f"[{concept[:12]}]" in text and "relevance" in text
    assert data["fragments"][0]["id"] == concept and data["depth"] == 1
    assert data["fragments"][0]["parent_id"] == topic and not data["keyword_only"]

    text, data = await lore.ok("query_memory", topic="blocking calls in tokio", depth=2, limit=3)
    assert data["fragments"][0]["id"] == fact and "spawn_blocking moves" in text

    text, data = await lore.ok("explore_memory", topic="rust async")
    assert [n["id"] for n in data["nodes"]] == [topic, concept, fact]
    assert [n["level"] for n in data["nodes"]] == [0, 1, 2]
    assert text.index(topic[:12]) < text.index(concept[:12]) < text.index(fact[:12])
    assert "\n  - [" in text  # indented

    _, data = await lore.ok("explore_memory", topic="rust async", max_depth=1)
    assert [n["id"] for n in data["nodes"]] == [topic, concept]

    text, data = await lore.ok("traverse_memory", fragment_id=concept[:8], direction="children")
    assert [n["id"] for n in data["neighbours"]] == [fact] and data["fragment"]["id"] == concept
    text, data = await lore.ok("traverse_memory", fragment_id=fact, direction="parent")
    assert [n["id"] for n in data["neighbours"]] == [concept]
    text, data = await lore.ok("traverse_memory", fragment_id=topic, direction="parent")
    assert data["neighbours"] == [] and "no parent" in text

    text, data = await lore.ok("list_topics")
    mine = next(t for t in data["topics"] if t["id"] == topic)
    assert mine["fragment_count"] == 2 and f"[{topic[:12]}]" in text


async def test_a_deeper_fragment_without_a_parent_goes_under_the_best_match(lore: Running):
    topic = await store(lore, "Gardening: growing tomatoes on a balcony", "Balcony tomato gardening")
    _, data = await lore.ok("store_memory", content="Cherry tomatoes need a 20 litre pot and "
                            "daily watering in summer", summary="tomato pots and watering",
                            depth=1)
    assert data["parent_id"] == topic


async def test_recalled_fragments_are_reinforced_soon_after_the_answer(lore: Running):
    topic = await store(lore, "Espresso brewing ratios and grind", "Espresso brewing")
    _, data = await lore.ok("query_memory", topic="espresso brewing", depth=0, limit=1)
    assert data["fragments"][0]["id"] == topic
    reader = Store(lore.db, readonly=True)
    try:
        with anyio.fail_after(10):
            while reader.get(topic).access_count == 0:
                await anyio.sleep(0.05)
    finally:
        reader.close()


async def test_an_empty_parent_id_means_no_parent(lore: Running):
    _, data = await lore.ok("store_memory", content="Notes on sourdough baking", summary="Sourdough",
                            parent_id="", depth=0)
    assert data["parent_id"] is None and data["depth"] == 0


async def test_associations_are_traversed_sideways_with_their_kind(lore: Running):
    a = await store(lore, "PostgreSQL indexes: btree, gin, brin", "PostgreSQL indexing")
    b = await store(lore, "SQLite FTS5 gives full-text search", "SQLite full-text search")
    writer = Store(lore.db)
    try:
        writer.link(a, b, "associative", 0.8, time.time())
    finally:
        writer.close()
    text, data = await lore.ok("traverse_memory", fragment_id=b, direction="associations")
    assert [(n["id"], n["edge"], n["weight"]) for n in data["neighbours"]] == [(a, "associative", 0.8)]
    assert "associative 0.80" in text
    _, data = await lore.ok("traverse_memory", fragment_id=a[:12], direction="associations")
    assert [n["id"] for n in data["neighbours"]] == [b]


async def test_ids_are_accepted_as_unique_prefixes_and_ambiguous_ones_refused(lore: Running):
    writer = Store(lore.db)
    try:
        for tail in ("1", "2"):
            writer.insert(NewFragment(content=f"twin {tail}", summary=f"twin topic {tail}", depth=0,
                                      id="feedface00" + tail * 22), time.time())
    finally:
        writer.close()
    message = await lore.error("traverse_memory", fragment_id="feedface", direction="children")
    assert "several fragments" in message and "more characters" in message
    _, data = await lore.ok("traverse_memory", fragment_id="FEEDFACE002", direction="children")
    assert data["fragment"]["id"] == "feedface00" + "2" * 22


# -- errors -----------------------------------------------------------------------------
@pytest.mark.parametrize(("tool", "args", "hint"), [
    ("traverse_memory", {"fragment_id": "0123456789abcdef", "direction": "children"}, "query_memory"),
    ("traverse_memory", {"fragment_id": "not-an-id!", "direction": "parent"}, "hex"),
    ("store_memory", {"content": "   ", "summary": "blank"}, "non-empty"),
    ("store_memory", {"content": "text", "summary": " \n "}, "non-empty"),
    ("store_memory", {"content": "x", "summary": "y", "parent_id": "0123456789abcdef"},
     "query_memory"),
    ("query_memory", {"topic": "   "}, "non-empty"),
])
async def test_bad_input_is_a_tool_error_that_says_what_to_do(lore: Running, tool: str,
                                                              args: dict[str, Any], hint: str):
    message = await lore.error(tool, **args)
    assert hint in message
    await lore.ok("list_topics")  # still serving


async def test_a_parent_at_the_wrong_depth_is_refused_with_the_right_depth(lore: Running):
    topic = await store(lore, "Kubernetes operations", "Kubernetes")
    message = await lore.error("store_memory", content="kubectl rollout restart", summary="restarts",
                               parent_id=topic, depth=2)
    assert "depth 1" in message
    await lore.ok("store_memory", content="kubectl rollout restart deploy/x", summary="restarts",
                  parent_id=topic, depth=1)


@pytest.mark.parametrize(("tool", "args", "field"), [
    ("query_memory", {"topic": "x", "depth": -1}, "depth"),
    ("query_memory", {"topic": "x", "depth": 9}, "depth"),
    ("query_memory", {"topic": "x", "limit": 1000}, "limit"),
    ("query_memory", {"topic": "x", "limit": 0}, "limit"),
    ("query_memory", {"topic": ""}, "topic"),
    ("query_memory", {"depth": 1}, "topic"),
    ("query_memory", {"topic": "x", "depth": "deep"}, "depth"),
    ("explore_memory", {"topic": "x", "max_depth": -2}, "max_depth"),
    ("traverse_memory", {"fragment_id": "0123456789ab", "direction": "sideways"}, "direction"),
    ("traverse_memory", {"fragment_id": "abc", "direction": "children"}, "fragment_id"),
    ("store_memory", {"content": "", "summary": "s"}, "content"),
    ("store_memory", {"content": "c", "summary": "s", "depth": -1}, "depth"),
    ("store_memory", {"content": "c", "summary": "s", "parent_id": 42}, "parent_id"),
])
async def test_the_schema_rejects_nonsense_arguments(lore: Running, tool: str,
                                                     args: dict[str, Any], field: str):
    message = await lore.error(tool, **args)
    assert field in message
    await lore.ok("list_topics")


# -- answer size ------------------------------------------------------------------------
async def test_answers_stay_under_about_two_thousand_tokens(lore: Running):
    topic = await store(lore, "A very large topic about observability", "Observability at scale")
    concept = await store(lore, "Tracing with OpenTelemetry", "OpenTelemetry tracing", topic, 1)
    long = "Spans carry attributes, events and links; sampling decides what is kept. " * 5
    for i in range(32):
        await store(lore, f"{long} (note {i})", f"tracing fact number {i} about spans", concept, 2)

    text, data = await lore.ok("traverse_memory", fragment_id=concept, direction="children")
    assert len(text) <= MAX_CHARS and data["omitted"] > 0 and "more not shown" in text
    assert len(compact(data)) <= MAX_CHARS
    text, data = await lore.ok("query_memory", topic="tracing spans sampling", depth=2, limit=100)
    assert len(text) <= MAX_CHARS and len(compact(data)) <= MAX_CHARS
    assert len(data["fragments"]) >= 5
    text, data = await lore.ok("explore_memory", topic="observability tracing", max_depth=8)
    assert len(text) <= MAX_CHARS and len(compact(data)) <= MAX_CHARS
    assert f"… {data['omitted']} more" in text and text.count("- [") == len(data["nodes"])
    text, _ = await lore.ok("query_memory", topic="tracing spans sampling", depth=2)
    assert len(text) <= MAX_CHARS


async def test_list_topics_counts_every_topic_but_sizes_only_those_it_shows(tmp_path: Path,
                                                                           model_dir: Path,
                                                                           path: str):
    async with running(tmp_path / "topics.db", tmp_path, model_dir, path) as lore:
        for i in range(MAX_TOPICS + 5):
            await store(lore, f"Everything about area {i}", f"Area {i}", depth=0)
        text, data = await lore.ok("list_topics")
    assert len(data["topics"]) + data["omitted"] == MAX_TOPICS + 5
    assert len(data["topics"]) <= MAX_TOPICS and data["omitted"] >= 5
    assert text.startswith("<recalled-notes>") and f"\n{MAX_TOPICS + 5} topics:" in text
    assert f"… and {data['omitted']} more" in text


# -- several servers, one database ------------------------------------------------------
async def test_three_servers_write_and_read_one_database_at_once(lore: Running, tmp_path: Path,
                                                                model_dir: Path, path: str):
    async with AsyncExitStack() as stack:
        servers = [lore]
        for i in range(2):
            (tmp_path / f"p{i}").mkdir()
            servers.append(await stack.enter_async_context(
                running(lore.db, tmp_path / f"p{i}", model_dir, path)))
        topic = await store(servers[1], "Team conventions for the billing service", "Billing service")

        async def write(n: int, server: Running) -> None:
            for k in range(6):
                await store(server, f"Convention {k} from session {n}: use idempotency keys "
                            f"for retries ({n}-{k})", f"billing convention {n}-{k}", topic, 1)
                await server.ok("query_memory", topic=f"billing convention {k}")

        async with anyio.create_task_group() as tg:
            for n, server in enumerate(servers):
                tg.start_soon(write, n, server)

        for server in servers:
            _, data = await server.ok("traverse_memory", fragment_id=topic, direction="children")
            summaries = {c["summary"] for c in data["neighbours"]}
            assert summaries == {f"billing convention {n}-{k}" for n in range(3) for k in range(6)}
            _, data = await server.ok("list_topics")
            assert [t["fragment_count"] for t in data["topics"] if t["id"] == topic] == [18]
    check = Store(lore.db, readonly=True)
    try:
        assert check.integrity_check() == ["ok"]
    finally:
        check.close()


async def test_the_current_project_ranks_first(lore: Running, tmp_path: Path, model_dir: Path,
                                              path: str):
    (tmp_path / "beta").mkdir()
    async with running(lore.db, tmp_path / "beta", model_dir, path) as beta:
        ids = {}
        for name, server in (("alpha", lore), ("beta", beta)):
            ids[name] = await store(server, f"Releases are cut with the ship script from the main "
                                    f"branch, then tagged ({name} repo)", f"Release process ({name})")
        for name, server in (("alpha", lore), ("beta", beta)):
            _, data = await server.ok("query_memory", topic="how do we cut a release", depth=0)
            assert [f["id"] for f in data["fragments"][:2]] == [ids[name], ids[other(name)]]


def other(name: str) -> str:
    return "beta" if name == "alpha" else "alpha"


# -- start-up and the service, in process -----------------------------------------------
async def test_an_empty_memory_answers_with_what_to_do_next(tmp_path: Path):
    from lore_plugin.recall.memory import Memory
    from lore_plugin.recall.render import RECALLED_NOTICE
    from lore_plugin.server.tools import build_server

    memory = Memory(tmp_path / "empty.db", None, project=str(tmp_path))
    async with Client(build_server(Service(memory))) as client:
        topics = await client.call_tool("list_topics", {})
        query = await client.call_tool("query_memory", {"topic": "anything at all"})
        explore = await client.call_tool("explore_memory", {"topic": "anything at all"})
    memory.close()
    assert "Memory is empty" in text_of(topics) and topics.structured_content == {
        "notice": RECALLED_NOTICE, "topics": [], "omitted": 0}
    assert "list_topics" in text_of(query) and query.structured_content["fragments"] == []
    assert "list_topics" in text_of(explore) and explore.structured_content["found"] is False


class FakeMemory:
    embedder = None

    @property
    def writer(self) -> None:
        return None


def test_a_busy_database_is_retried_then_reported_clearly(monkeypatch: pytest.MonkeyPatch):
    from lore_plugin.service import engine

    monkeypatch.setattr(engine.time, "sleep", lambda s: None)
    service = Service(FakeMemory())  # type: ignore[arg-type]
    calls = []

    def busy_once(memory: Any) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise BusyError("database is locked")
        return "done"

    assert service.call(busy_once) == "done" and len(calls) == 2

    def always_busy(memory: Any) -> None:
        raise BusyError("database is locked")

    with pytest.raises(ToolFailure, match="busy") as caught:
        service.call(always_busy)
    assert str(caught.value) == BUSY_MESSAGE

    def missing(memory: Any) -> None:
        raise NotFound("no fragment with id x; use query_memory to find ids")

    with pytest.raises(ToolFailure, match="use query_memory"):
        service.call(missing)


def compact(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


async def test_store_memory_on_an_empty_memory_places_it_and_never_stores_it_twice(
        tmp_path: Path, model_dir: Path, path: str):
    project = tmp_path / "billing-service"
    project.mkdir()
    async with running(tmp_path / "memory.db", project, model_dir, path) as fresh:
        text, data = await fresh.ok("store_memory", content="Deploys happen Thursday 09:00 UTC.",
                                    summary="The billing deploy window is Thursday 09:00 UTC")
        assert data["depth"] == 2 and len(data["created"]) == 2 and not data["duplicate"]
        assert "made topic" in text and "Project billing-service" in text and data["id"] in text
        again, same = await fresh.ok("store_memory", content="Deploys happen Thursday 09:00 UTC.",
                                     summary="The billing deploy window is Thursday 09:00 UTC")
        assert same["duplicate"] and same["id"] == data["id"] and same["created"] == []
        assert "Already known" in again and data["id"] in again
        _, topics = await fresh.ok("list_topics")
        assert [t["summary"] for t in topics["topics"]] == ["Project billing-service"]
        assert topics["topics"][0]["fragment_count"] == 2  # the concept and the one fact
