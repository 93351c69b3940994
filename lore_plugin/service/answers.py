"""The five memory tools' answers, without the mcp SDK: each takes validated arguments and
gives compact text for the model plus the same data as structured content. The in-process MCP
server (server/tools.py) registers them with the SDK; the memory service runs them for the
thin fronts through `run_tool`, which checks the arguments against the same pydantic types."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from pydantic import BaseModel, ValidationError

from ..core.cues import clean_cues
from ..core.errors import LoreError
from ..core.types import Fragment
from ..recall import render
from ..recall.group_commit import group_writer
from ..recall.group_requests import StoreRequest
from ..recall.memory import Memory
from ..recall.storing import Stored, stored_text
from . import pending, spaced
from .engine import Service, ToolFailure
from .tool_schema import (
    ContentArg,
    CuesArg,
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
Answer = tuple[str, BaseModel]
MAX_CHARS = 8_000  # about 2,000 tokens: the most a default answer may put in the context
MAX_TREE_NODES = 60
MAX_TOPICS = 60  # list_topics shows at most this many; the rest are counted


def fitted(build: Callable[[int], Answer], total: int) -> Answer:
    """Builds the answer with as many of `total` items as fit in MAX_CHARS, text and JSON."""
    shown = total
    while True:
        text, data = build(shown)
        size = max(len(text), len(data.model_dump_json()))
        if size <= MAX_CHARS or shown <= 1:
            break
        shown = max(1, min(shown - 1, int(shown * MAX_CHARS / size)))
    return render.cut(text, MAX_CHARS), data


def more_note(omitted: int, hint: str) -> str:
    return f"\n… {omitted} more not shown; {hint}." if omitted else ""


def query_memory(service: Service, topic: str, depth: int = 1, limit: int = 10,
                 project: str | None = None) -> Answer:
    waiting = pending.matching(pending.settle(service.memory), topic)  # read-your-writes
    recall = service.call(lambda m: spaced.fused_query(service, m, topic, depth, limit), True,
                          project)
    results, spaces = [h.scored for h in recall.hits], [h.space for h in recall.hits]
    service.reinforce_later([h.fragment.id for h in recall.hits if h.space == spaced.LOCAL])

    def build(n: int) -> Answer:
        text = render.recall_text(topic, depth, results[:n], recall.keyword_only, spaces,
                                  recall.unreachable)
        text = render.recalled(text) if results else text
        text += more_note(len(results) - n, "lower the limit or narrow the topic")
        text += pending.pending_text(waiting)
        return text, QueryAnswer(
            topic=topic, depth=depth, keyword_only=recall.keyword_only,
            fragments=[fragment_out(s.fragment, ScoredOut, match=round(s.score, 4), space=space)
                       for s, space in zip(results[:n], spaces)],
            omitted=len(results) - n, unreachable=recall.unreachable, being_placed=waiting)

    return fitted(build, len(results))


def explore_memory(service: Service, topic: str, max_depth: int = 2,
                   project: str | None = None) -> Answer:
    pending.settle(service.memory)  # a fact just stored may belong in the tree
    tree = service.call(lambda m: m.explore(topic, max_depth=max_depth, reinforce=False),
                        True, project)
    if tree is None:
        return (f"No topic in memory matches '{render.clip(topic, 80)}'. "
                "Use list_topics to see what is known.",
                ExploreAnswer(topic=topic, found=False, nodes=[]))
    service.reinforce_later([tree.fragment.id])  # as for query_memory: off the answer path
    total = len(preorder(tree))

    def build(n: int) -> Answer:
        shown = preorder(first_nodes(tree, n))
        text = render.recalled(render.tree_text(first_nodes(tree, n), max_nodes=2 * n + 1))
        text += more_note(total - n, "traverse_memory a branch to see the rest")
        return text, ExploreAnswer(
            topic=topic, found=True, omitted=total - n,
            nodes=[fragment_out(f, TreeNodeOut, level=lv) for f, lv in shown])

    return fitted(build, min(total, MAX_TREE_NODES))


def traverse_memory(service: Service, fragment_id: str, direction: str,
                    project: str | None = None) -> Answer:
    def run(m: Memory) -> tuple[Fragment, list[tuple[Fragment, str | None, float | None]]]:
        frag = m.get(fragment_id)
        if direction == "children":
            return frag, [(c, None, None) for c in m.children(frag.id)]
        if direction == "parent":
            parent = m.parent(frag.id)
            return frag, [] if parent is None else [(parent, None, None)]
        return frag, [(o, kind, w) for o, kind, w in m.associations(frag.id)]

    try:
        frag, found = service.call(run, project=project)
    except ToolFailure:  # an id given out at the journal commit, maybe not placed yet
        state = pending.journaled(service.memory, fragment_id)
        if state is None:
            raise
        if state == "pending":
            raise ToolFailure(f"{fragment_id} was stored and is still being placed, so it has "
                              "no place in the tree yet; try again in a few seconds") from None
        frag, found = service.call(run, project=project)
    title = {"children": "Children", "parent": "Parent", "associations": "Associations"}[direction]
    head = render.fragment_line(frag, content=False)
    if direction == "parent" and not found:
        head += "\nThis is a topic: it has no parent. traverse_memory(id, 'children') goes deeper."

    def build(n: int) -> Answer:
        shown = found[:n]
        extra = ([f"[{kind} {weight:.2f}]" for _, kind, weight in shown]
                 if direction == "associations" else None)
        label = f"{title} ({len(found)})" if n >= len(found) else f"{title} ({n} of {len(found)})"
        body = render.neighbours_text(label, [f for f, _, _ in shown], extra)
        text = render.recalled(head if direction == "parent" and not found else f"{head}\n{body}")
        text += more_note(len(found) - n, "traverse a child or use query_memory to narrow")
        return text, TraverseAnswer(
            fragment=fragment_out(frag), direction=direction, omitted=len(found) - n,
            neighbours=[fragment_out(f, NeighbourOut, edge=k, weight=w) for f, k, w in shown])

    return fitted(build, len(found))


def store_memory(service: Service, content: str, summary: str, parent_id: str | None = None,
                 depth: int = 2, project: str | None = None,
                 cues: list[str] | None = None) -> Answer:
    # The one place a store is handed to the writer: it is accepted into the store journal
    # with the stores of every session queued meanwhile (one transaction, no model run), and
    # answered there (service/pending.py); the group writer places it after. It takes no
    # service lock; the parent is read in a second call, so a busy retry of that read never
    # repeats a write that went through.
    space = spaced.write_space(service, project)
    if space != spaced.LOCAL:  # routed to a hub space (issue 28): written there, not grouped
        stored, parent = spaced.store(service, space, content, summary, parent_id, depth, project,
                                      clean_cues(cues))
        return stored_answer(stored, parent)
    try:
        accepted = group_writer(service.memory).accept(StoreRequest(
            content, summary, parent_id, depth,
            project=project if project is not None else service.memory.project,
            cues=clean_cues(cues))).result()
        if not accepted.idle:  # others ahead of it: answered at the journal commit
            return pending.pending_answer(accepted)
        try:  # the writer was idle: placement follows at once, and the answer says where
            service.model_ready()  # (a first store may load the model, as it always did)
            stored = accepted.placed.result(timeout=pending.QUICK_PLACE)
        except FutureTimeout:
            return pending.pending_answer(accepted)
    except ToolFailure:
        raise
    except LoreError as exc:
        raise ToolFailure(str(exc)) from exc
    return stored_answer(stored, service.call(lambda m: m.parent(stored.fragment.id)))


def stored_answer(stored: Stored, parent: Fragment | None) -> Answer:
    frag = stored.fragment
    return stored_text(stored, parent), StoreAnswer(
        id=frag.id, depth=frag.depth, summary=frag.summary, parent_id=frag.parent_id,
        duplicate=stored.duplicate, created=[f.id for f in stored.created], pending=False)


def list_topics(service: Service, project: str | None = None) -> Answer:
    # Sizes are counted only for the topics that can be shown.
    topics, total = service.call(
        lambda m: (m.topics(limit=MAX_TOPICS), m.reader.topic_totals(m.project)[0]),
        project=project)

    def build(n: int) -> Answer:
        text = render.topics_text(topics, max_topics=n, total=total)
        return render.recalled(text) if topics else text, TopicsAnswer(
            omitted=total - n,
            topics=[fragment_out(t.fragment, TopicOut, fragment_count=t.fragment_count)
                    for t in topics[:n]])

    return fitted(build, len(topics))


# -- the tools by name, with the arguments the SDK would check --------------------------
class QueryArgs(BaseModel):
    topic: TopicArg
    depth: DepthArg = 1
    limit: LimitArg = 10


class ExploreArgs(BaseModel):
    topic: TopicArg
    max_depth: MaxDepthArg = 2


class TraverseArgs(BaseModel):
    fragment_id: IdArg
    direction: DirectionArg


class StoreArgs(BaseModel):
    content: ContentArg
    summary: SummaryArg
    parent_id: ParentArg = None
    depth: StoreDepthArg = 2
    cues: CuesArg = None


class NoArgs(BaseModel):
    pass


TOOLS: dict[str, tuple[type[BaseModel], Callable[..., Answer]]] = {
    "query_memory": (QueryArgs, query_memory),
    "explore_memory": (ExploreArgs, explore_memory),
    "traverse_memory": (TraverseArgs, traverse_memory),
    "store_memory": (StoreArgs, store_memory),
    "list_topics": (NoArgs, list_topics),
}


def run_tool(service: Service, name: str, arguments: object, project: str | None) -> dict:
    """One tools/call, answered as MCP's CallToolResult JSON: what the SDK server would send
    for the same call (its error texts start "Error executing tool <name>: " as the SDK's)."""
    if name not in TOOLS:
        return failed(f"Unknown tool: {name}")
    model, fn = TOOLS[name]
    try:
        args = model.model_validate(arguments if isinstance(arguments, dict) else {})
        text, data = fn(service, **dict(args), project=project)
    except (ValidationError, ToolFailure) as exc:
        return failed(f"Error executing tool {name}: {exc}")
    except Exception:  # a crash: its text stays in the log, as the SDK keeps it
        log.exception("tool %s failed", name)
        return failed(f"Error executing tool {name}")
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured(data),
            "isError": False}


def failed(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}
