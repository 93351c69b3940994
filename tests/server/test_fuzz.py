"""Fuzzing with hypothesis: arbitrary arguments to every MCP tool never escape as anything
but a tool error, and the server keeps answering; garbage transcripts never stop the reader."""

from __future__ import annotations

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from lore_plugin.capture.transcript import read_delta
from lore_plugin.recall.memory import Memory
from lore_plugin.server.tools import Service, build_server

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=60),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
FIELDS = ["topic", "depth", "limit", "max_depth", "fragment_id", "direction", "content", "summary",
          "parent_id", "extra"]
TOOLS = ["query_memory", "explore_memory", "traverse_memory", "store_memory", "list_topics"]
ARGS = st.dictionaries(st.sampled_from(FIELDS), JSON | st.text(max_size=300), max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(st.sampled_from(TOOLS), ARGS), min_size=1, max_size=8))
def test_no_tool_argument_escapes_as_anything_but_a_tool_error(calls, db_path, embedder):
    memory = Memory(db_path, embedder, project="/fuzz")
    topic = memory.store("Fuzzing notes", "Fuzzing", depth=0)
    memory.store("Hypothesis finds edge cases", "Hypothesis", parent_id=topic.id, depth=1)

    async def drive() -> None:
        async with Client(build_server(Service(memory))) as client:
            for tool, args in calls:
                result = await client.call_tool(tool, args)  # raising here fails the test
                assert result.content, (tool, args)
            sane = await client.call_tool("list_topics", {})
            assert not sane.is_error and "Fuzzing" in sane.content[0].text

    anyio.run(drive)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(
    st.binary(max_size=200),
    JSON.map(lambda v: __import__("json").dumps(v).encode()),
    st.fixed_dictionaries({"type": st.sampled_from(["user", "assistant", "attachment", "system"]),
                           "message": JSON, "isMeta": st.booleans()}).map(
        lambda v: __import__("json").dumps(v).encode())), max_size=20),
    offset=st.integers(min_value=-5, max_value=5000))
def test_no_transcript_bytes_make_the_reader_raise(lines, offset, tmp_path):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    delta = read_delta(path, max(offset, 0))
    assert delta.end_offset >= max(offset, 0) or delta.truncated
