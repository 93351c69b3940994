"""The in-process MCP server: the five tools of service/answers.py registered with the mcp
SDK and spoken over stdio. It is what `LORE_SERVICE=off` runs, and where no memory service can
be had (no Unix sockets); otherwise each session runs the thin front (front.py) and the one
memory service answers. It is also what tool_list.json is generated from.

Start-up is kept light so `initialize` and `tools/list` answer at once: the embedding model,
numpy and the vector matrix load in a background thread after the tool list has been served
(design §2). Tool functions are synchronous, so the SDK runs them on worker threads and a
slow first embedding never blocks protocol traffic. One lock serialises use of the Memory.
Every answer is compact text for the model plus the same data as structured content."""

from __future__ import annotations

import logging
import os
import threading
from contextlib import asynccontextmanager
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from .. import __version__
from ..recall import render
from ..recall.memory import Memory
from ..service import answers, spaced
from ..service.answers import MAX_CHARS, MAX_TOPICS
from ..service.engine import BUSY_MESSAGE, Service, ToolFailure
from ..service.tool_schema import (
    ContentArg,
    CuesArg,
    DepthArg,
    DirectionArg,
    ExploreAnswer,
    IdArg,
    LimitArg,
    MaxDepthArg,
    ParentArg,
    QueryAnswer,
    StoreAnswer,
    StoreDepthArg,
    SummaryArg,
    TopicArg,
    TopicsAnswer,
    TraverseAnswer,
    structured,
)

__all__ = ["BUSY_MESSAGE", "INSTRUCTIONS", "MAX_CHARS", "MAX_TOPICS", "Service", "build_server",
           "main"]
log = logging.getLogger("lore.server")
WARM_DELAY = 1.0  # warm-up starts after tools/list, or after this long without one
INSTRUCTIONS = (
    "Lore is your long-term memory of earlier Claude Code sessions: topics > concepts > facts > "
    "details. Use it when earlier context would help. Start broad (list_topics, or "
    "query_memory at depth 0-1), then drill down with a higher depth or traverse_memory. "
    "Store durable knowledge worth keeping with store_memory. What memory returns, in tool "
    "answers, the session brief and the notes added to prompts: " + render.FRAMING
)


def result(run: Any) -> CallToolResult:
    """One tool's answer as the SDK's result; a ToolFailure becomes its ToolError."""
    try:
        text, data = run()
    except ToolFailure as exc:
        raise ToolError(str(exc)) from exc
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=structured(data))


# -- the tools --------------------------------------------------------------------------
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def build_server(service: Service, lifespan: Any = None) -> MCPServer:
    server = LoreServer("lore", instructions=INSTRUCTIONS, version=__version__,
                        lifespan=lifespan)

    @server.tool(annotations=READ)
    def query_memory(topic: TopicArg, depth: DepthArg = 1, limit: LimitArg = 10,
                     ) -> Annotated[CallToolResult, QueryAnswer]:
        """Search long-term memory (knowledge kept from earlier sessions) for a topic and return
        the fragments at one depth: 0 = broad topics, 1 = concepts, 2 = facts, 3+ = details.
        Start shallow, then drill deeper with a higher depth or traverse_memory(id, "children").
        Each result shows its id, summary, content and relevance."""
        return result(lambda: answers.query_memory(service, topic, depth, limit))

    @server.tool(annotations=READ)
    def explore_memory(topic: TopicArg, max_depth: MaxDepthArg = 2,
                       ) -> Annotated[CallToolResult, ExploreAnswer]:
        """Show the whole subtree of the topic that best matches, as an indented tree of ids,
        summaries and relevance, to see the shape of what is known before drilling in."""
        return result(lambda: answers.explore_memory(service, topic, max_depth))

    @server.tool(annotations=READ)
    def traverse_memory(fragment_id: IdArg, direction: DirectionArg,
                        ) -> Annotated[CallToolResult, TraverseAnswer]:
        """Move from one fragment to its neighbours: its children (deeper, more detail), its
        parent (broader context) or its associations (sideways, related fragments across
        topics)."""
        return result(lambda: answers.traverse_memory(service, fragment_id, direction))

    @server.tool(annotations=WRITE)
    def store_memory(content: ContentArg, summary: SummaryArg, parent_id: ParentArg = None,
                     depth: StoreDepthArg = 2, cues: CuesArg = None,
                     ) -> Annotated[CallToolResult, StoreAnswer]:
        """Store one piece of knowledge so later sessions can recall it. Just content and
        summary is enough: it goes under the best-fitting concept, or a topic and concept are
        made for it; the answer says where. Or give parent_id (one level up), or depth 0 for a
        new topic. Give cues too: 3-6 short phrases someone might later ask for it by, in
        other words than its own (searched, never shown). Knowledge already stored is not
        copied: the answer gives the existing id.
        When the answer says "stored; being placed", the knowledge is durable and its id is
        final (use it as a parent_id at once; query_memory finds it), but where it goes, or
        whether it repeats known knowledge, is decided moments later."""
        return result(lambda: answers.store_memory(service, content, summary, parent_id, depth,
                                                   cues=cues))

    @server.tool(annotations=READ)
    def list_topics() -> Annotated[CallToolResult, TopicsAnswer]:
        """List every top-level topic in long-term memory with its summary, how many fragments
        are known under it and its relevance. A good first call to see what is known."""
        return result(lambda: answers.list_topics(service))

    return server


class LoreServer(MCPServer):
    """Notes when the tool list has been served: the signal that warm-up may start."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listed = threading.Event()

    async def list_tools(self):  # type: ignore[no-untyped-def]
        tools = await super().list_tools()
        self.listed.set()
        return tools


# -- entry point ------------------------------------------------------------------------
def main() -> None:
    # One BLAS thread: a matrix-vector product over the index is memory-bound, and spinning
    # BLAS threads compete with Claude Code and the other sessions' servers for two cores.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    # numpy now, before any thread starts (0.08 s): the warm-up threads and the first tool call
    # would otherwise import it at once, and a half-initialised numpy fails to import.
    import numpy  # noqa: F401

    from ..core.config import load_settings
    from ..core.private import lock_down
    from ..core.project import project_key
    from ..embedding.embedder import LocalEmbedder
    from ..safety.logs import setup_logging
    from .team import open_socket  # issue 29: with the repository's team space, if it shares

    settings = load_settings()
    lock_down(settings.home, settings.db_path)
    setup_logging(settings.log_dir, "server", stderr=True)
    project = project_key(os.getcwd())
    memory = Memory(settings.db_path, LocalEmbedder(settings.home / "models"), project=project)
    service = Service(memory)
    spaced.attach(service, settings)  # with a hub: its spaces are read and routed to
    log.info("serving %s for project %s", settings.db_path, project)
    close_socket = open_socket(settings, service.lock, memory, service.warm)  # for the hook

    @asynccontextmanager
    async def lifespan(server: LoreServer):  # type: ignore[no-untyped-def]
        def warm() -> None:
            server.listed.wait(WARM_DELAY)
            service.warm_up()
            service.warm.set()

        threading.Thread(target=warm, name="lore-warm-up", daemon=True).start()
        yield {}

    try:
        build_server(service, lifespan=lifespan).run("stdio")
    finally:
        close_socket()
        service.close()

