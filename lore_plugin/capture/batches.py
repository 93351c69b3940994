"""How a transcript is cut into extraction calls: the next slice of unread lines that makes
one prompt, rendered, clipped and redacted, and the end of the slice before it, as context.
The ingestor and `lore ingest`'s estimate slice alike."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..core.types import Turn
from ..safety.redact import redact
from .tools import head_and_tail
from .transcript import Delta, read_delta, render_turns

MAX_PROMPT_CHARS = 60_000
MAX_TURN_CHARS = 8_000
MAX_TOOL_CHARS = 6_000  # the tool digest of one slice; failures are kept first
MIN_BATCH_BYTES = 16 * 1024
CONTEXT_CHARS = 1_500  # the end of the previous slice shown again, for context only
CONTEXT_BYTES = 256 * 1024  # how far back to look for it


def _clipped(turns: list[Turn]) -> list[Turn]:
    """A pasted log or file dump is not knowledge-sized: its head says what it is and its
    tail how it ended (the error at the end of a traceback). A busy slice's tool lines are
    bounded too: failures first, then calls in order, then a count of the rest."""
    head, tail = MAX_TURN_CHARS * 3 // 8, MAX_TURN_CHARS * 5 // 8
    out = [t if len(t.text) <= MAX_TURN_CHARS
           else replace(t, text=head_and_tail(t.text, head, tail)) for t in turns]
    tools = [i for i, t in enumerate(out) if t.role == "tool"]
    if sum(len(out[i].text) for i in tools) <= MAX_TOOL_CHARS:
        return out
    ranked = sorted(tools, key=lambda i: (" failed: " not in out[i].text, i))
    kept, used = set(), 0
    for i in ranked:
        if used + len(out[i].text) <= MAX_TOOL_CHARS:
            kept.add(i)
            used += len(out[i].text)
    dropped = len(tools) - len(kept)
    out = [t for i, t in enumerate(out) if t.role != "tool" or i in kept]
    return [*out, Turn("tool", f"({dropped} more tool calls not shown)")]


def read_batch(path: Path, offset: int, batch_bytes: int, limit: int | None = None
               ) -> tuple[Delta, str]:
    """The next slice of a transcript that makes one extraction prompt, and its text (redacted,
    '' for noise only): at most batch_bytes (and `limit`) of the file, less when its text would
    not fit a prompt. The ingestor and `lore ingest`'s estimate slice alike."""
    budget = batch_bytes if limit is None else min(batch_bytes, limit)
    while True:
        delta = read_delta(path, offset, max_bytes=budget)
        if delta.missing or delta.truncated or delta.end_offset <= offset:
            return delta, ""
        text = redact(render_turns(_clipped(delta.turns))).strip()
        if len(text) > MAX_PROMPT_CHARS and budget > MIN_BATCH_BYTES:
            budget //= 2  # a smaller slice of the file makes a prompt that fits
            continue
        return delta, text


def context_before(path: Path, offset: int, chars: int = CONTEXT_CHARS) -> str:
    """The last turns before `offset` (redacted, about `chars` long, '' at the start): the
    problem a fix in this slice answers is often stated at the end of the slice before."""
    if offset <= 0:
        return ""
    start = max(offset - CONTEXT_BYTES, 0)
    if start > 0:
        try:
            with open(path, "rb") as handle:
                handle.seek(start)
                window = handle.read(offset - start)
        except OSError:
            return ""
        newline = window.find(b"\n")
        if newline < 0:
            return ""  # one line longer than the window: no whole turn to show
        start += newline + 1
    delta = read_delta(path, start, max_bytes=offset - start)
    if delta.end_offset > offset or not delta.turns:
        return ""
    kept: list[Turn] = []
    size = 0
    for turn in reversed(delta.turns):
        if turn.role == "tool" and kept:
            continue  # the words carry the context; one tool line at the very end at most
        size += len(turn.text)
        kept.insert(0, turn)
        if size >= chars:
            break
    text = redact(render_turns(kept)).strip()
    return text if len(text) <= chars else "…" + text[-chars:]
