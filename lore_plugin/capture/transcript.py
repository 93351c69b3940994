"""Claude Code JSONL transcript (2.1.197 format) from a byte offset -> conversational turns.

Facts this module relies on (see design.md section 2 and the fixtures):
- The file is append-only, so a byte offset after a complete line is a safe watermark.
- The last line may still be being written: a line counts only once its b"\\n" is there.
- Text holds U+2028, so lines are split on b"\\n" only, never with str.splitlines().
- One assistant message may be written over several lines that share message.id.
- Most user lines are not the human: tool results, isMeta expansions of slash commands,
  the /compact summary, local-command output. Only the human's words are kept as "user"
  turns; tool calls and their results become short "tool" turns (tools.py), the evidence.
Which lines are requests, and how kept text is cleaned, lives in lines.py (shared with the
Stop hook's cheap count).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.project import project_key
from ..core.types import Turn
from .lines import (
    BASE64_MARKER,
    MAX_LINE_BYTES,
    _parse,
    _queued_prompt_text,
    _text_blocks,
    _user_request_text,
    clean_text,
    count_turns_fast,
)
from .tools import result_line, tool_calls, tool_results

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any

__all__ = ["BASE64_MARKER", "MAX_LINE_BYTES", "Delta", "clean_text", "count_turns_fast",
           "delta_time", "project_key", "read_delta", "render_turns", "subagent_paths"]

# Chunk size used when a single line is longer than max_bytes and must still be consumed whole.
_READ_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Delta:
    """What read_delta found between start_offset and end_offset."""

    turns: list[Turn]
    start_offset: int
    end_offset: int  # byte offset just after the last complete line consumed
    lines: int  # complete lines consumed, blank ones included
    bad_lines: int  # lines that were not a JSON object of a usable shape
    cwd: str | None  # first cwd seen in the delta (the project the session runs in)
    session_id: str | None
    truncated: bool = False  # the file is now shorter than start_offset (shrank or replaced)
    missing: bool = False  # the file does not exist (deleted, or not written yet)


def _assistant_text(obj: dict[str, Any], message: dict[str, Any]) -> str | None:
    # "<synthetic>" messages ("No response requested.") and API error notices are written by
    # Claude Code itself, not by the model.
    if message.get("model") == "<synthetic>" or obj.get("isApiErrorMessage"):
        return None
    text = clean_text("\n\n".join(_text_blocks(message.get("content"))))
    return text or None


# --- reading ---------------------------------------------------------------------------------


def _read_complete_lines(handle: Any, max_bytes: int | None) -> tuple[bytes, int, int]:
    """(bytes from the current position up to and including the last wanted b"\\n", how many
    bytes that consumed, how many over-long lines were consumed without being kept)."""
    if max_bytes is None:
        buffer = handle.read()
        data = buffer[: buffer.rfind(b"\n") + 1]
        return data, len(data), 0
    buffer = handle.read(max(max_bytes, 0))
    cut = buffer.rfind(b"\n")
    if cut >= 0:
        return buffer[: cut + 1], cut + 1, 0
    # One line is longer than max_bytes. Consume it whole anyway, so that a 10 MB line cannot
    # wedge ingestion by never fitting in a batch; past MAX_LINE_BYTES it is no longer kept
    # (it would not be parsed anyway), so a runaway line costs a bounded amount of memory.
    chunks, kept, consumed = [buffer], len(buffer), len(buffer)
    while chunk := handle.read(_READ_CHUNK):
        newline = chunk.find(b"\n")
        piece = chunk if newline < 0 else chunk[: newline + 1]
        consumed += len(piece)
        if kept <= MAX_LINE_BYTES:
            chunks.append(piece)
            kept += len(piece)
        if newline >= 0:
            if kept > MAX_LINE_BYTES:
                return b"", consumed, 1
            return b"".join(chunks), consumed, 0
    return b"", 0, 0  # the line is still being written: leave it for later


class _TurnBuilder:
    """Collects kept texts in file order and joins split assistant messages into one turn."""

    def __init__(self) -> None:
        self._turns: list[dict[str, Any]] = []
        self._by_message_id: dict[str, dict[str, Any]] = {}
        self._seen_uuids: set[object] = set()
        self._calls: dict[str, dict[str, Any]] = {}  # tool_use id -> its turn, until answered

    def called(self, obj: dict[str, Any], content: Any) -> None:
        """A tool turn per call, where it was made: a slice that ends before the result still
        shows it, and reading line by line gives the turns one read gives."""
        for use_id, call in tool_calls(content):
            self._calls[use_id] = self.add(obj, "tool", call, None) or {}

    def answered(self, obj: dict[str, Any], content: Any) -> None:
        for use_id, failure in tool_results(content):
            if failure is None:
                continue  # a success: its output is left out (tools.py)
            turn = self._calls.pop(use_id, None)
            if turn:
                turn["parts"][-1] = result_line(turn["parts"][-1], failure)
            else:  # its call was in an earlier slice
                self.add(obj, "tool", result_line("an earlier call", failure), None)

    def add(self, obj: dict[str, Any], role: str, text: str, message_id: str | None
            ) -> dict[str, Any] | None:
        uuid = obj.get("uuid") if isinstance(obj.get("uuid"), str) else None
        if uuid is not None:
            seen = (uuid, role, text) if role == "tool" else uuid  # a line may hold several calls
            if seen in self._seen_uuids:
                return None  # the same line written twice must not become two turns
            self._seen_uuids.add(seen)
        if message_id is not None and message_id in self._by_message_id:
            self._by_message_id[message_id]["parts"].append(text)
            return None
        timestamp = obj.get("timestamp")
        turn = {"role": role, "parts": [text], "uuid": uuid}
        turn["timestamp"] = timestamp if isinstance(timestamp, str) else None
        turn["is_sidechain"] = obj.get("isSidechain") is True
        self._turns.append(turn)
        if message_id is not None:
            self._by_message_id[message_id] = turn
        return turn

    def build(self) -> list[Turn]:
        return [
            Turn(t["role"], "\n\n".join(t["parts"]), t["timestamp"], t["uuid"], t["is_sidechain"])
            for t in self._turns
        ]


def _keep_line(builder: _TurnBuilder, obj: dict[str, Any]) -> None:
    line_type = obj.get("type")
    if line_type == "user":
        text = _user_request_text(obj)
        if text is not None:
            builder.add(obj, "user", text, None)
        elif isinstance(obj.get("message"), dict):
            builder.answered(obj, obj["message"].get("content"))
    elif line_type == "assistant":
        message = obj.get("message")
        if isinstance(message, dict):
            if message.get("model") != "<synthetic>":
                builder.called(obj, message.get("content"))
            text = _assistant_text(obj, message)
            if text is not None:
                message_id = message.get("id")
                builder.add(
                    obj, "assistant", text, message_id if isinstance(message_id, str) else None
                )
    elif line_type == "attachment":
        text = _queued_prompt_text(obj)
        if text is not None:
            builder.add(obj, "user", text, None)
    # Everything else (system, summary, mode, queue-operation, file-history-snapshot, unknown
    # future types ...) is bookkeeping: skipped without counting as bad.


def read_delta(path: str | os.PathLike[str], offset: int, max_bytes: int | None = None) -> Delta:
    """Parse the complete lines after `offset` into turns. Never raises on file content.

    With max_bytes, stops at the first line boundary at or before that many bytes, but always
    consumes at least one complete line. Without it, reads to the end of the file.
    """
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except (FileNotFoundError, NotADirectoryError):
        return Delta([], offset, offset, 0, 0, None, None, missing=True)
    with handle:
        if os.fstat(handle.fileno()).st_size < offset:
            return Delta([], offset, offset, 0, 0, None, None, truncated=True)
        handle.seek(offset)
        data, consumed, dropped = _read_complete_lines(handle, max_bytes)

    import orjson  # here, not at the top: see _parse

    builder = _TurnBuilder()
    lines = bad = dropped
    cwd: str | None = None
    session_id: str | None = None
    for raw in data.split(b"\n")[:-1]:  # data ends with b"\n": the last piece is always empty
        lines += 1
        if not raw.strip():
            continue
        obj = _parse(raw, orjson.loads)
        if obj is None:
            bad += 1
            continue
        if cwd is None and isinstance(obj.get("cwd"), str):
            cwd = obj["cwd"]
        if session_id is None and isinstance(obj.get("sessionId"), str):
            session_id = obj["sessionId"]
        try:
            _keep_line(builder, obj)
        except (TypeError, ValueError, AttributeError):  # a known type in an unknown shape
            bad += 1
    return Delta(builder.build(), offset, offset + consumed, lines, bad, cwd, session_id)


# --- small helpers for callers ---------------------------------------------------------------


def delta_time(delta: Delta, fallback: float) -> float:
    """When the conversation of a delta happened: its last turn's timestamp (unix seconds)."""
    from datetime import datetime

    for turn in reversed(delta.turns):
        if turn.timestamp:
            try:
                return datetime.fromisoformat(turn.timestamp.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return fallback


def subagent_paths(transcript_path: str | os.PathLike[str]) -> list[Path]:
    """Subagent transcripts of a session: <dir>/<session-id>/subagents/agent-*.jsonl, sorted."""
    main = Path(transcript_path)
    folder = main.parent / main.stem / "subagents"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("agent-*.jsonl") if p.is_file())


def _label(turn: Turn) -> str:
    # A subagent's "user" is the main agent briefing it, not the human: say so to the LLM.
    if turn.role == "tool":
        return "Tool"
    if turn.is_sidechain:
        return "Subagent task" if turn.role == "user" else "Subagent"
    return "User" if turn.role == "user" else "Assistant"


def render_turns(turns: Iterable[Turn]) -> str:
    """Compact text for the extraction prompt: one 'User: ...' / 'Assistant: ...' per turn."""
    return "\n".join(f"{_label(turn)}: {turn.text}" for turn in turns)
