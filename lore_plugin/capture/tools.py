"""The evidence of a turn: what its tools did, in one short line each.

A failing command's error, the files edited and the command that then worked are often the
knowledge itself (a gotcha and its fix), so extraction sees them: the tool or command, the
paths touched, and for a failure the head and the tail of its output (where a traceback ends).
A success's output is left out: it is long, and the assistant's next words say what it meant.
"""

from __future__ import annotations

from .lines import clean_text

TYPE_CHECKING = False  # not typing's: see lines.py
if TYPE_CHECKING:
    from typing import Any

CALL_CHARS = 200  # a command or path list, clipped
FAILURE_HEAD = 300
FAILURE_TAIL = 500  # a traceback's last lines name the error
# The input keys that say what a tool touched, in the order worth showing.
_WHAT = ("command", "file_path", "path", "notebook_path", "pattern", "url", "query",
         "description", "skill", "prompt")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_call(name: str, tool_input: Any) -> str:
    """'Bash `pytest -q`', 'Edit src/app.py', or the bare tool name."""
    if not isinstance(tool_input, dict):
        return name
    for key in _WHAT:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip():
            shown = f"`{_clip(value, CALL_CHARS)}`" if key == "command" else _clip(value, CALL_CHARS)
            return f"{name} {shown}"
    return name


def tool_calls(content: Any) -> list[tuple[str, str]]:
    """(tool_use id, described call) of each tool_use block of an assistant message."""
    if not isinstance(content, list):
        return []
    return [(block["id"], describe_call(str(block.get("name") or "tool"), block.get("input")))
            for block in content
            if isinstance(block, dict) and block.get("type") == "tool_use"
            and isinstance(block.get("id"), str)]


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict)
                         and b.get("type") == "text" and isinstance(b.get("text"), str))
    return ""


def _failed(block: dict[str, Any], text: str) -> bool:
    if block.get("is_error") is True:
        return True
    head = text.lstrip()[:40].lower()
    return head.startswith("exit code") and not head.startswith("exit code 0")


def head_and_tail(text: str, head: int, tail: int) -> str:
    """The first `head` and last `tail` characters, with the middle marked as cut."""
    if len(text) <= head + tail:
        return text
    return f"{text[:head]} […] {text[-tail:]}"


def tool_results(content: Any) -> list[tuple[str, str | None]]:
    """(tool_use id, the failure's output or None for a success) of each tool_result block."""
    if not isinstance(content, list):
        return []
    found: list[tuple[str, str | None]] = []
    for block in content:
        if not (isinstance(block, dict) and block.get("type") == "tool_result"
                and isinstance(block.get("tool_use_id"), str)):
            continue
        text = clean_text(_result_text(block.get("content")))
        failure = None
        if _failed(block, text):
            failure = head_and_tail(" ".join(text.split()), FAILURE_HEAD, FAILURE_TAIL)
        found.append((block["tool_use_id"], failure))
    return found


def result_line(call: str, failure: str | None) -> str:
    return call if failure is None else f"{call} failed: {failure or '(no output)'}"
