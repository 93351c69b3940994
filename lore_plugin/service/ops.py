"""What the memory service answers, op by op, over its one warm Memory: the five tools (as
MCP CallToolResult JSON, exactly what the in-process server sends), the per-prompt recall
(the hook's request, as the in-process servers answer it), `lore recall`, the viewer's search,
and its status."""

from __future__ import annotations

import os
import time
from typing import Any

from ..core.project import project_key
from ..recall import render
from ..recall.memory import Memory
from ..recall.prompt_recall import answer as answer_prompt
from ..recall.prompt_recall import serve as serve_prompt
from ..recall.space_notes import answer_with_spaces
from ..store.journal import backlog_line
from .answers import run_tool
from .engine import Service, ToolFailure
from .hub_notes import HubNotes
from .spaces_brief import WAIT, SpacesBrief
from .team import TeamSpaces


class Ops:
    def __init__(self, engine: Service, version: str) -> None:
        self.engine, self.version = engine, version
        self.started = time.monotonic()
        self.answered = 0
        self.teams = TeamSpaces(engine.settings, engine.memory, engine.warm)  # issue 29
        # With a hub: the brief's hub and team parts, read here for the SessionStart hook.
        self.briefs = SpacesBrief(engine.settings) if engine.settings is not None else None
        # And the hub spaces the user reads, for the per-prompt notes (issue 28).
        self.hubs = HubNotes(engine.settings, engine.memory, engine.warm)

    def answer(self, op: str, args: dict[str, Any], project: str | None,
               request: dict[str, Any]) -> dict[str, Any]:
        self.answered += 1
        if op == "tool":
            return run_tool(self.engine, str(args.get("name", "")), args.get("arguments"), project)
        if op == "prompt":  # the hook's request itself carries the prompt and the seen ids
            return self.prompt(request)
        if op == "open":  # a session's front, at its start: warm its repository's team space
            self.teams.for_folder(args.get("cwd"))
            if self.briefs is not None:  # and its brief's hub part, for the next session
                self.briefs.warm(args.get("cwd"))
            return {"ok": True}
        if op == "spaces_brief":  # the SessionStart hook's hub and team parts
            return self.spaces_brief(args)
        if op == "recall":
            return self.recall(args, project)
        if op == "status":
            return self.status()
        if op == "search":
            return self.search(args)
        return {"error": f"unknown op {op!r}"}

    def prompt(self, request: dict[str, Any]) -> dict[str, Any]:
        """The per-prompt notes, ranked for the session's own project and with its
        repository's team notes: the hook's request names its folder (`cwd`)."""
        cwd = request.get("cwd")
        project = project_key(cwd) if isinstance(cwd, str) and os.path.isabs(cwd) else None
        team = self.teams.for_folder(cwd)
        hubs = self.hubs.for_prompt(team.space if team is not None else None)

        def answering(memory: Memory, req: dict, warm: bool) -> dict:
            if project is not None:  # under the service's lock, as every call sets it
                memory.project = project
            if hubs or team is not None:
                return answer_with_spaces(memory, hubs, team, req, warm, project)
            return answer_prompt(memory, req, warm)

        return serve_prompt(self.engine.lock, self.engine.memory, self.engine.warm, request,
                            answering)

    def spaces_brief(self, args: dict[str, Any]) -> dict[str, Any]:
        """The brief's hub part for the folder `cwd`; {"hub": {}} without a hub."""
        if self.briefs is None:
            return {"hub": {}}
        wait = args.get("wait", WAIT)
        wait = float(wait) if isinstance(wait, (int, float)) and wait >= 0 else WAIT
        return self.briefs.answer(args.get("cwd"), wait)

    def close(self) -> None:
        self.teams.close()
        self.hubs.close()
        if self.briefs is not None:
            self.briefs.close()

    def recall(self, args: dict[str, Any], project: str | None) -> dict[str, Any]:
        """`lore recall QUERY`: the text the command prints, from the warm model and index."""
        query, depth, limit = args.get("query"), args.get("depth", 1), args.get("limit", 10)
        if not isinstance(query, str) or not isinstance(depth, int) or not isinstance(limit, int):
            return {"error": "recall needs a query (text), a depth and a limit (integers)"}
        try:
            recall = self.engine.call(lambda m: m.query(query, depth=depth, limit=limit), True,
                                      project)
        except ToolFailure as exc:
            return {"error": str(exc)}
        return {"text": render.recall_text(query, depth, recall.fragments, recall.keyword_only),
                "ids": [s.fragment.id for s in recall.fragments]}

    def search(self, args: dict[str, Any]) -> dict[str, Any]:
        """The viewer's search (web/served.py): `Memory.search` (depth None) or `query` at a
        depth, never reinforcing, ranked for `project` (None: none), as ids with their score
        and similarity; the viewer reads the rows from its own connection."""
        text, depth, limit = args.get("text"), args.get("depth"), args.get("limit", 10)
        project = args.get("project")
        if (not isinstance(text, str) or not isinstance(limit, int)
                or not (depth is None or isinstance(depth, int))
                or not (project is None or isinstance(project, str))):
            return {"error": "search needs a text, a limit, a depth (or null) and a project "
                             "(or null)"}

        def run(memory: Memory) -> Any:
            saved, memory.project = memory.project, project
            try:
                return (memory.search(text, limit=limit) if depth is None else
                        memory.query(text, depth=depth, limit=limit, reinforce=False))
            finally:
                memory.project = saved

        try:
            found = self.engine.call(run, True)
        except ToolFailure as exc:
            return {"error": str(exc)}
        return {"hits": [[s.fragment.id, s.score, s.similarity] for s in found.fragments],
                "keyword_only": found.keyword_only}

    def status(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "version": self.version, "warm": self.engine.warm.is_set(),
                "uptime": round(time.monotonic() - self.started, 1), "answered": self.answered,
                "rss_mb": rss_mb(), "db": str(self.engine.memory.db_path),
                "journal": backlog_line(self.engine.memory.db_path, time.time())}


def rss_mb() -> float | None:
    """This process's resident memory (Linux /proc); None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None
