"""Classifying Claude Code transcript lines, cheaply: which lines are the human's requests,
how to clean kept text, and the Stop hook's count of pending requests.

This is the part of transcript reading that runs on every turn, so it imports only the
standard library, and lightly: no dataclasses, typing or orjson, and not even json or re (a
request line is parsed by core/lean_json.py, and the cleaning regexes below are compiled on
first use), because each of those costs milliseconds the hook does not have. transcript.py
builds turns on top of it, with the same classification, so the count and the turns always
agree.
"""

from __future__ import annotations

import mmap
import os

from ..core.lean_json import loads as lean_loads

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    import re
    from collections.abc import Callable
    from typing import Any

# A line this large is not parsed at all: orjson would need several times its size in memory,
# and no real conversational turn is this big (pasted screenshots are a few MB).
MAX_LINE_BYTES = 64 * 1024 * 1024


# --- text cleaning ----------------------------------------------------------------------------

class _Patterns:
    """The cleaning regexes, compiled once a text needs them: `import re` alone costs the Stop
    hook ~6 ms, and most of the lines it judges are plain prompts that need none of them."""

    def __init__(self) -> None:
        import re

        # Wrappers whose whole content is machine output or harness chatter, never the human's
        # words. An unclosed wrapper runs to the end of the text: better to drop too much noise
        # than leak it.
        self.noise_block = re.compile(
            r"<(system-reminder|local-command-stdout|local-command-stderr|local-command-caveat"
            r"|bash-stdout|bash-stderr|task-notification|user-prompt-submit-hook)>.*?(?:</\1>|\Z)",
            re.DOTALL,
        )
        self.command_tag = re.compile(r"<command-(name|message|args)>(.*?)</command-\1>",
                                      re.DOTALL)
        self.bash_input = re.compile(r"<bash-input>(.*?)</bash-input>", re.DOTALL)
        self.data_uri = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=]{16,}")
        # 100+ base64 characters without a break: an inlined image, archive or key blob. Plain
        # words, paths and hex hashes either break the run or lack the mixed character classes
        # checked below.
        self.base64_run = re.compile(r"[A-Za-z0-9+/]{100,}={0,2}")
        self.many_blank_lines = re.compile(r"\n{3,}")


_compiled: list[_Patterns] = []


def _patterns() -> _Patterns:
    if not _compiled:
        _compiled.append(_Patterns())
    return _compiled[0]


# Claude Code writes these when the user presses Esc; they carry no knowledge.
_INTERRUPT_PREFIX = "[Request interrupted by user"

BASE64_MARKER = "[base64 omitted]"


def _base64_or_keep(match: re.Match[str]) -> str:
    run = match.group(0)
    looks_encoded = (
        any(c.isdigit() for c in run)
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
    )
    return BASE64_MARKER if looks_encoded else run


def _render_command(text: str) -> str:
    """'<command-name>/compact</command-name>...<command-args>x</command-args>' -> '/compact x'."""
    tags: dict[str, str] = {}
    command_tag = _patterns().command_tag
    for match in command_tag.finditer(text):
        tags.setdefault(match.group(1), match.group(2).strip())
    rest = command_tag.sub("", text).strip()
    name = tags.get("name") or tags.get("message") or ""
    if name and not name.startswith("/"):
        name = "/" + name
    command = f"{name} {tags.get('args', '')}".strip()
    return f"{command}\n{rest}".strip() if rest else command


def clean_text(text: str) -> str:
    """Strip harness wrappers and inlined binary from one kept text; '' when nothing is left."""
    # Each pattern runs only where it can match, tested with plain string methods first, so
    # that a plain prompt is cleaned without compiling (or importing) any regex.
    if "<" in text:
        text = _patterns().noise_block.sub("", text)
        if "<command-" in text:
            text = _render_command(text)
        if "<bash-input>" in text:
            text = _patterns().bash_input.sub(lambda m: "! " + m.group(1).strip(), text)
    if "base64," in text:
        text = _patterns().data_uri.sub(BASE64_MARKER, text)
    # A base64 run holds no whitespace, so it lies inside one word of 100+ characters.
    if len(text) >= 100 and any(len(word) >= 100 for word in text.split()):
        text = _patterns().base64_run.sub(_base64_or_keep, text)
    if "\n\n\n" in text:
        text = _patterns().many_blank_lines.sub("\n\n", text)
    text = text.strip()
    if text.startswith(_INTERRUPT_PREFIX):
        return ""
    return text


def _text_blocks(content: Any) -> list[str]:
    """The text of a message's content: a plain string, or the 'text' blocks of a block list.

    Every other block (tool_use, tool_result, thinking with its signature, redacted_thinking,
    image, document) is dropped here, which is what removes tool noise and base64 payloads.
    """
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]


# --- line classification (shared by read_delta and count_turns_fast so they always agree) -----


def _user_request_text(obj: dict[str, Any]) -> str | None:
    """The human's words on a top-level 'user' line, or None when the line is not a request."""
    if obj.get("type") != "user":
        return None
    # isMeta: slash-command expansions, caveats, "Continue from where you left off."
    # isCompactSummary: a recap of earlier turns; extracting it again would duplicate knowledge.
    if obj.get("isMeta") or obj.get("isCompactSummary") or obj.get("isVisibleInTranscriptOnly"):
        return None
    message = obj.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    # A line that carries a tool result is tool plumbing, whatever else it holds.
    if isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    ):
        return None
    text = clean_text("\n".join(_text_blocks(content)))
    return text or None


def _queued_prompt_text(obj: dict[str, Any]) -> str | None:
    """A prompt the human typed while the agent was busy.

    Claude Code delivers it as an attachment of type queued_command and never writes it as a
    'user' line, so skipping every attachment would lose those words. Task notifications use
    the same attachment with another commandMode, and are not the human.
    """
    if obj.get("type") != "attachment":
        return None
    attachment = obj.get("attachment")
    if not isinstance(attachment, dict) or attachment.get("type") != "queued_command":
        return None
    if attachment.get("commandMode", "prompt") != "prompt":
        return None
    origin = attachment.get("origin")
    if isinstance(origin, dict) and origin.get("kind", "human") != "human":
        return None
    prompt = attachment.get("prompt")
    text = clean_text("\n".join(_text_blocks(prompt)))
    return text or None


def _parse(line: bytes, loads: Callable[[bytes], Any] = lean_loads) -> dict[str, Any] | None:
    """The Stop hook parses a handful of lines with json.loads's own scanner (lean_json);
    read_delta passes orjson's loads, which is faster in bulk but costs ~25 ms to import (it
    pulls in uuid, platform and dataclasses), more than the hook's whole budget allows."""
    if len(line) > MAX_LINE_BYTES:
        return None
    try:
        obj = loads(line)  # both reject invalid UTF-8 with a ValueError
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


# --- the cheap count for the Stop hook -------------------------------------------------------

# The only lines that can hold a user request. Claude Code writes compact JSON (the spaced form
# is what Python's json.dumps writes, e.g. in hand-made transcripts). A quote inside a string
# value is escaped (\"), so text that merely mentions these words never matches. Plain
# bytes.find over the four spellings finds both kinds (no regex: see the module's docstring);
# matching lines are then parsed and judged by the same functions as read_delta, so the two
# always agree.
_REQUEST_MARKERS = (b'"type":"user"', b'"type": "user"', b'"type":"queued_command"',
                    b'"type": "queued_command"')
# Tool results are most user lines by count and nearly all by bytes; skipping them unparsed is
# what keeps the count cheap. _user_request_text rejects them too.
_TOOL_RESULT_MARKER = b'"tool_use_id"'


def _count_requests(data: Any, start: int, size: int) -> int:
    """Count request lines in data[start:size] (bytes or mmap), complete lines only.

    Linear in the bytes: after a line is judged the search resumes past its end, so each
    byte is looked at a bounded number of times however many markers one line holds. Going
    back to the line start for every marker grew with their square: 0.4 s for 40K markers
    in one line and 7 s for 160K, against 21 ms and 0.12 s now (medians, a busy 2-core box)."""
    end = data.rfind(b"\n", start, size) + 1
    count, pos = 0, start
    # The next place of each marker at or after `pos` (-1: none left). A place is searched for
    # again only once `pos` has passed it, so each marker's search also moves forward only.
    found = [data.find(marker, pos, end) for marker in _REQUEST_MARKERS]
    while pos < end:
        places = [(at, i) for i, at in enumerate(found) if at >= 0]
        if not places:
            break
        at, which = min(places)
        # `pos` is always a line start, so the way back never passes it.
        line_start = data.rfind(b"\n", pos, at) + 1 or pos
        # Always found: data[end - 1] is a newline.
        line_end = data.find(b"\n", at + len(_REQUEST_MARKERS[which]), end)
        pos = line_end + 1
        found = [data.find(_REQUEST_MARKERS[i], pos, end) if 0 <= f < pos else f
                 for i, f in enumerate(found)]
        if line_end - line_start > MAX_LINE_BYTES:
            continue  # never copied: _parse would refuse it anyway
        if data.find(_TOOL_RESULT_MARKER, line_start, line_end) >= 0:
            continue
        obj = _parse(data[line_start:line_end])
        try:
            if obj is not None and (_user_request_text(obj) or _queued_prompt_text(obj)):
                count += 1
        except (TypeError, ValueError, AttributeError):
            pass
    return count


def count_turns_fast(path: str | os.PathLike[str], offset: int) -> int:
    """Count complete pending user requests after `offset`; 0 if the file is missing or shorter.

    Called by the Stop hook after every turn. It scans bytes and parses only the few lines that
    might be a human request, so a tail of tens of MB costs one regex pass. It agrees with the
    user turns of read_delta, except that a line written twice is counted twice here.
    """
    offset = max(offset, 0)
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size <= offset:
                return 0
            try:
                # A mapping avoids copying a long tail into memory. The file is append-only, so
                # the mapped bytes do not change under us.
                with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                    return _count_requests(mapped, offset, size)
            except (OSError, ValueError):  # a file system or file type that cannot be mapped
                handle.seek(offset)
                data = handle.read()
                return _count_requests(data, 0, len(data))
    except (FileNotFoundError, NotADirectoryError):
        return 0
