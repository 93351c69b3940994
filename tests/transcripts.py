"""Builds transcripts in Claude Code 2.1.197's JSONL shape (as in tests/fixtures) for
scenarios the recorded fixtures do not cover: long sessions, resumes, garbage lines."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

SESSION = "0f4c2d9e-5b8a-4c1e-9d3f-7a6b5c4d3e2f"


class TranscriptWriter:
    def __init__(self, path: Path, cwd: str = "/work/project-a", session: str = SESSION,
                 day: str = "2026-03-14") -> None:
        self.path, self.cwd, self.session, self.day = path, cwd, session, day
        self.parent: str | None = None
        self.seconds = 0
        path.parent.mkdir(parents=True, exist_ok=True)

    def _base(self, kind: str) -> dict:
        self.seconds += 7
        line_id = str(uuid.uuid4())
        base = {"parentUuid": self.parent, "isSidechain": False, "type": kind, "uuid": line_id,
                "timestamp": f"{self.day}T10:{self.seconds // 60 % 60:02d}:{self.seconds % 60:02d}.000Z",
                "userType": "external", "entrypoint": "cli", "cwd": self.cwd,
                "sessionId": self.session, "version": "2.1.197", "gitBranch": "main"}
        self.parent = line_id
        return base

    def append(self, obj: dict | bytes) -> None:
        with open(self.path, "ab") as fh:
            fh.write(obj if isinstance(obj, bytes) else json.dumps(obj).encode() + b"\n")

    def user(self, text: str) -> None:
        line = self._base("user")
        line["message"] = {"role": "user", "content": text}
        self.append(line)

    def assistant(self, text: str, tool: bool = True) -> None:
        msg_id = f"msg_{uuid.uuid4().hex[:24]}"
        blocks: list[dict] = [{"type": "thinking", "thinking": "hmm", "signature": "c2lnbmF0dXJl" * 20},
                              {"type": "text", "text": text}]
        if tool:
            blocks.append({"type": "tool_use", "id": "toolu_1", "name": "Bash",
                           "input": {"command": "ls"}})
        for block in blocks:  # Claude Code writes one line per content block
            line = self._base("assistant")
            line["message"] = {"id": msg_id, "type": "message", "role": "assistant",
                               "model": "claude-opus-4-8", "content": [block]}
            self.append(line)
        if tool:
            result = self._base("user")
            result["message"] = {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt\nb.txt"}]}
            self.append(result)

    def exchange(self, n: int, topic: str = "billing") -> None:
        for i in range(n):
            self.user(f"Turn {i} about {topic}: we decided that {topic} rule {i} uses value {i * 7}.")
            self.assistant(f"Noted: {topic} rule {i} uses value {i * 7}; I'll apply it.")

    def compact(self, summary: str) -> None:
        boundary = self._base("system")
        boundary.update({"subtype": "compact_boundary", "content": "Conversation compacted"})
        self.append(boundary)
        line = self._base("user")
        line["isCompactSummary"] = True
        line["message"] = {"role": "user", "content": summary}
        self.append(line)
