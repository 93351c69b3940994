"""The MCP server: five thin, typed tools over recall/memory.py, spoken over stdio.

Start-up is kept light so `initialize` and `tools/list` answer at once: the embedding model,
numpy and the vector matrix load in a background thread after the tool list has been served
(design §2). Tool functions are synchronous, so the SDK runs them on worker threads and a
slow first embedding never blocks protocol traffic. One lock serialises use of the Memory.
Every answer is compact text for the model plus the same data as structured content."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel

from .. import __version__
from ..core.errors import LoreError
from ..core.types import Fragment
from ..recall import render
from ..recall.memory import Memory
from ..recall.storing import stored_text
from ..store import BusyError, Store
from . import spaced
from .tool_schema import (
    ContentArg,
    DepthArg,
    DirectionArg,
    ExploreAnswer,
    IdArg,
    LimitArg,
    MaxDepthArg,
    NeighbourOut,
    ParentArg,
    QueryAnswer,
    ScoredOut,
    StoreAnswer,
    StoreDepthArg,
    SummaryArg,
    TopicArg,
    TopicOut,
    TopicsAnswer,
    TraverseAnswer,
    TreeNodeOut,
    first_nodes,
    fragment_out,
    preorder,
    structured,
)

log = logging.getLogger("lore.server")
T = TypeVar("T")

MAX_CHARS = 8_000  # about 2,000 tokens: the most a default answer may put in the context
BUSY_ATTEMPTS = 3  # each attempt already waits out SQLite's busy timeout
BUSY_MESSAGE = ("memory is busy: another Lore process is writing to the database; "
                "try again in a moment")
BACKFILL_BATCH = 4  # small batches keep the model's memory arena (and peak RSS) small
MAX_TREE_NODES = 60
MAX_TOPICS = 60  # list_topics shows at most this many; the rest are counted
WARM_DELAY = 1.0  # warm-up starts after tools/list, or after this long without one
INSTRUCTIONS = (
    "Lore is your long-term memory of earlier Claude Code sessions: topics > concepts > facts > "
    "details. Use it when earlier context would help. Start broad (list_topics, or "
    "query_memory at depth 0-1), then drill down with a higher depth or traverse_memory. "
    "Store durable knowledge worth keeping with store_memory. What memory returns, in tool "
    "answers, the session brief and the notes added to prompts: " + render.FRAMING
)


def answer(text: str, data: BaseModel) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=structured(data))


def fitted(build: Callable[[int], tuple[str, BaseModel]], total: int) -> CallToolResult:
    """Builds the answer with as many of `total` items as fit in MAX_CHARS, text and JSON."""
    shown = total
    while True:
        text, data = build(shown)
        size = max(len(text), len(data.model_dump_json()))
        if size <= MAX_CHARS or shown <= 1:
            break
        shown = max(1, min(shown - 1, int(shown * MAX_CHARS / size)))
    return answer(render.cut(text, MAX_CHARS), data)


def more_note(omitted: int, hint: str) -> str:
    return f"\n… {omitted} more not shown; {hint}." if omitted else ""


# -- the service: one Memory, one lock, busy retries, domain errors as tool errors -------
class Service:
    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.lock = threading.Lock()
        self._reinforcer = ThreadPoolExecutor(1, thread_name_prefix="lore-reinforce")
        self._reinforcing: Memory | None = None  # its own connections, used by that thread only
        self._writing_snapshot = threading.Lock()
        self.warm = threading.Event()  # warm-up done: the per-prompt hook may use the model
        self.spaces: spaced.Spaces | None = None  # with a hub: what is read and written
        self.write_space = spaced.LOCAL

    def model_ready(self) -> None:
        """Waits for the embedding model outside the lock, so other tools are not held up."""
        self.memory.embedder_ready()

    def call(self, fn: Callable[[Memory], T], needs_model: bool = False) -> T:
        if needs_model:
            self.model_ready()
        for attempt in range(BUSY_ATTEMPTS):
            try:
                with self.lock:
                    return fn(self.memory)
            except BusyError as exc:
                log.warning("database busy (attempt %d/%d): %s", attempt + 1, BUSY_ATTEMPTS, exc)
                if attempt + 1 < BUSY_ATTEMPTS:
                    time.sleep(0.05 * 4**attempt)
            except LoreError as exc:
                raise ToolError(str(exc)) from exc
        raise ToolError(BUSY_MESSAGE)

    def reinforce_later(self, ids: list[str]) -> None:
        """Reconsolidation off the answer path: a busy database delays it, not the answer."""
        if ids:
            try:
                self._reinforcer.submit(self._reinforce, ids)
            except RuntimeError:  # shutting down: reinforcement is best effort
                pass

    def _reinforce(self, ids: list[str]) -> None:
        if self._reinforcing is None:
            m = self.memory
            self._reinforcing = Memory(m.db_path, None, m.clock, m.project)
        self._reinforcing.reinforce(ids)  # best effort: it logs and skips on failure

    def close(self) -> None:
        # A snapshot being written is let finish (0.1 s at 100K): a one-question session would
        # otherwise never leave one, and every next server would read SQLite again.
        if self._writing_snapshot.acquire(timeout=2):
            self._writing_snapshot.release()
        self._reinforcer.shutdown(wait=True, cancel_futures=True)
        if self._reinforcing is not None:
            self._reinforcing.close()
        if self.lock.acquire(timeout=2):  # a call stuck on a busy database must not hang exit
            self.memory.close()

    def _load_index(self) -> None:
        try:
            store = Store(self.memory.db_path, readonly=True)
            try:
                self.memory.index.refresh(store)
            finally:
                store.close()
        except Exception:  # the first query loads it instead
            log.exception("loading the vector index failed")
            return
        self._save_snapshot()  # now, not after warm-up: a short session may end before that

    def _save_snapshot(self) -> None:
        with self._writing_snapshot:
            try:
                started = time.perf_counter()
                store = Store(self.memory.db_path, readonly=True)
                try:
                    if self.memory.index.save_snapshot(store):
                        log.info("vector snapshot written in %.2f s",
                                 time.perf_counter() - started)
                finally:
                    store.close()
            except Exception as exc:  # only a cache: the next server reads SQLite instead
                log.warning("could not write the vector snapshot: %s", exc)

    def warm_up(self) -> None:
        """Loads the model, embeds what was stored without one, and loads the vector index.
        Best effort: a failure only means the first query does the loading."""
        marks = [time.perf_counter()]
        try:
            # numpy first, on one thread: onnxruntime and the index both import it, and two
            # threads importing it at once can see it half-initialised and fail (main() has
            # imported it already; this covers in-process users such as the benchmarks).
            import numpy  # noqa: F401

            # The vector index loads from its own connection while the model loads here:
            # both spend most of their time outside the GIL, so the first query waits for
            # the slower of the two rather than their sum.
            loader = threading.Thread(target=self._load_index, name="lore-index", daemon=True)
            loader.start()
            self.model_ready()
            marks.append(time.perf_counter())
            loader.join()
            filler = Memory(self.memory.db_path, self.memory.embedder, self.memory.clock)
            try:
                done = filler.backfill_embeddings(batch=BACKFILL_BATCH)
                filler.date_backlog()
            finally:
                filler.close()
            marks.append(time.perf_counter())
            with self.lock:
                self.memory.search("warm up", limit=1, mode="vector")
            marks.append(time.perf_counter())
            log.info("warm in %.2f s: model %.2f s, %d backfilled in %.2f s, index %.2f s",
                     marks[3] - marks[0], marks[1] - marks[0], done, marks[2] - marks[1],
                     marks[3] - marks[2])
        except Exception:
            log.exception("warm-up failed; the first query will load what it needs")


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
        recall = service.call(lambda m: spaced.fused_query(service, m, topic, depth, limit), True)
        results, spaces = [h.scored for h in recall.hits], [h.space for h in recall.hits]
        service.reinforce_later([h.fragment.id for h in recall.hits if h.space == spaced.LOCAL])

        def build(n: int) -> tuple[str, QueryAnswer]:
            text = render.recall_text(topic, depth, results[:n], recall.keyword_only, spaces,
                                      recall.unreachable)
            text = render.recalled(text) if results else text
            text += more_note(len(results) - n, "lower the limit or narrow the topic")
            return text, QueryAnswer(
                topic=topic, depth=depth, keyword_only=recall.keyword_only,
                fragments=[fragment_out(s.fragment, ScoredOut, match=round(s.score, 4),
                                        space=space) for s, space in zip(results[:n], spaces)],
                omitted=len(results) - n, unreachable=recall.unreachable)

        return fitted(build, len(results))

    @server.tool(annotations=READ)
    def explore_memory(topic: TopicArg, max_depth: MaxDepthArg = 2,
                       ) -> Annotated[CallToolResult, ExploreAnswer]:
        """Show the whole subtree of the topic that best matches, as an indented tree of ids,
        summaries and relevance, to see the shape of what is known before drilling in."""
        tree = service.call(lambda m: m.explore(topic, max_depth=max_depth, reinforce=False),
                            True)
        if tree is not None:  # as for query_memory: a busy database delays it, not the answer
            service.reinforce_later([tree.fragment.id])
        if tree is None:
            return answer(f"No topic in memory matches '{render.clip(topic, 80)}'. "
                          "Use list_topics to see what is known.",
                          ExploreAnswer(topic=topic, found=False, nodes=[]))
        total = len(preorder(tree))

        def build(n: int) -> tuple[str, ExploreAnswer]:
            shown = preorder(first_nodes(tree, n))
            text = render.recalled(render.tree_text(first_nodes(tree, n), max_nodes=2 * n + 1))
            text += more_note(total - n, "traverse_memory a branch to see the rest")
            return text, ExploreAnswer(
                topic=topic, found=True, omitted=total - n,
                nodes=[fragment_out(f, TreeNodeOut, level=lv) for f, lv in shown])

        return fitted(build, min(total, MAX_TREE_NODES))

    @server.tool(annotations=READ)
    def traverse_memory(fragment_id: IdArg, direction: DirectionArg,
                        ) -> Annotated[CallToolResult, TraverseAnswer]:
        """Move from one fragment to its neighbours: its children (deeper, more detail), its
        parent (broader context) or its associations (sideways, related fragments across
        topics)."""
        def run(m: Memory) -> tuple[Fragment, list[tuple[Fragment, str | None, float | None]]]:
            frag = m.get(fragment_id)
            if direction == "children":
                return frag, [(c, None, None) for c in m.children(frag.id)]
            if direction == "parent":
                parent = m.parent(frag.id)
                return frag, [] if parent is None else [(parent, None, None)]
            return frag, [(o, kind, w) for o, kind, w in m.associations(frag.id)]

        frag, found = service.call(run)
        title = {"children": "Children", "parent": "Parent",
                 "associations": "Associations"}[direction]
        head = render.fragment_line(frag, content=False)
        if direction == "parent" and not found:
            head += "\nThis is a topic: it has no parent. traverse_memory(id, 'children') goes deeper."

        def build(n: int) -> tuple[str, TraverseAnswer]:
            shown = found[:n]
            extra = ([f"[{kind} {weight:.2f}]" for _, kind, weight in shown]
                     if direction == "associations" else None)
            label = f"{title} ({len(found)})" if n >= len(found) else \
                f"{title} ({n} of {len(found)})"
            body = render.neighbours_text(label, [f for f, _, _ in shown], extra)
            text = render.recalled(head if direction == "parent" and not found else f"{head}\n{body}")
            text += more_note(len(found) - n, "traverse a child or use query_memory to narrow")
            return text, TraverseAnswer(
                fragment=fragment_out(frag), direction=direction, omitted=len(found) - n,
                neighbours=[fragment_out(f, NeighbourOut, edge=k, weight=w) for f, k, w in shown])

        return fitted(build, len(found))

    @server.tool(annotations=WRITE)
    def store_memory(content: ContentArg, summary: SummaryArg, parent_id: ParentArg = None,
                     depth: StoreDepthArg = 2) -> Annotated[CallToolResult, StoreAnswer]:
        """Store one piece of knowledge so later sessions can recall it. Just content and
        summary is enough: it goes under the best-fitting concept, or a topic and concept are
        made for it; the answer says where. Or give parent_id (one level up), or depth 0 for a
        new topic. Knowledge already stored is not copied: the answer gives the existing id."""
        stored, parent = spaced.store(service, content, summary, parent_id, depth)
        frag = stored.fragment
        return answer(stored_text(stored, parent), StoreAnswer(
            id=frag.id, depth=frag.depth, summary=frag.summary, parent_id=frag.parent_id,
            duplicate=stored.duplicate, created=[f.id for f in stored.created]))

    @server.tool(annotations=READ)
    def list_topics() -> Annotated[CallToolResult, TopicsAnswer]:
        """List every top-level topic in long-term memory with its summary, how many fragments
        are known under it and its relevance. A good first call to see what is known."""
        # Sizes are counted only for the topics that can be shown.
        topics, total = service.call(
            lambda m: (m.topics(limit=MAX_TOPICS), m.reader.topic_totals(m.project)[0]))

        def build(n: int) -> tuple[str, TopicsAnswer]:
            text = render.topics_text(topics, max_topics=n, total=total)
            return render.recalled(text) if topics else text, TopicsAnswer(
                omitted=total - n,
                topics=[fragment_out(t.fragment, TopicOut, fragment_count=t.fragment_count)
                        for t in topics[:n]])

        return fitted(build, len(topics))

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
    spaced.attach(service, settings)
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

