"""How a transcript is cut into extraction calls: the next slice of unread lines that makes
one prompt, rendered, clipped and redacted. The ingestor and `lore ingest`'s estimate slice
alike."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..core.types import Turn
from ..safety.redact import redact
from .transcript import Delta, read_delta, render_turns

MAX_PROMPT_CHARS = 60_000
MAX_TURN_CHARS = 8_000
MIN_BATCH_BYTES = 16 * 1024


def _clipped(turns: list[Turn]) -> list[Turn]:
    """A pasted log or file dump is not knowledge-sized; its head is enough context."""
    return [t if len(t.text) <= MAX_TURN_CHARS else replace(t, text=t.text[:MAX_TURN_CHARS] + " […]")
            for t in turns]


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
