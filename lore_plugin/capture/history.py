"""The conversations from before Lore's first run: recorded once, read only on request.

The first time Lore runs (the SessionStart hook, or any worker or `lore ingest` that finds no
record), every transcript under ~/.claude/projects is recorded with the end of its last
complete line, and its watermark starts there. The hooks and the sweep only read past a
watermark, so that history is never sent to the LLM unasked: `lore ingest` estimates what
backfilling it would cost, asks, and then reads it under a watermark of its own.

Light imports at the top: the SessionStart hook records the history.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.config import Settings

HINT_SHOWN = "history_hint_shown"  # meta key: the brief mentions the history once
ASSUMED_OUTPUT_TOKENS = 1000  # per extraction call, until the ledger has measured some
TOOL_USE_OVERHEAD = 350  # tokens the API adds to a forced tool call (its own system prompt)
CHARS_PER_TOKEN = 3.5  # Anthropic's rule of thumb for English; code and JSON run denser


def claude_projects_dir() -> Path:
    from ..core.configfile import claude_projects_dir as projects_dir

    return Path(projects_dir(os.environ))


def transcript_files(projects: Path) -> list[Path]:
    """Session transcripts and their subagents' transcripts."""
    found = [*projects.glob("*/*.jsonl"), *projects.glob("*/*/subagents/*.jsonl")]
    return sorted(p for p in found if p.is_file())


def complete_size(path: Path) -> int:
    """The offset just after the file's last complete line (0 when it has none)."""
    try:
        with open(path, "rb") as handle:
            end = handle.seek(0, os.SEEK_END)
            step = 64 * 1024
            while end > 0:
                start = max(0, end - step)
                handle.seek(start)
                chunk = handle.read(end - start)
                cut = chunk.rfind(b"\n")
                if cut >= 0:
                    return start + cut + 1
                end = start
    except OSError:
        pass
    return 0


def record_if_first_run(settings: Settings, projects: Path | None = None,
                        now: float | None = None, live: Path | None = None) -> int | None:
    """Records the history if this is Lore's first run: the number of transcripts recorded,
    or None when the history was recorded before (by this or another process). `live` is the
    session a Stop or SessionEnd hook fired for: Lore runs in it, so it is not history (nor
    are its subagents' transcripts)."""
    from ..store import Store

    store = Store(settings.db_path)
    try:
        if store.history_recorded():
            return None
        skip = (str(live), str(live.parent / live.stem) + os.sep) if live else ()
        sizes = [(str(p), complete_size(p)) for p in
                 transcript_files(projects or claude_projects_dir())
                 if not (skip and (str(p) == skip[0] or str(p).startswith(skip[1])))]
        if not store.record_history(sizes, time.time() if now is None else now):
            return None
        return len(store.history())
    finally:
        store.close()


def hint_once(settings: Settings) -> str | None:
    """The brief's one mention of unread history, the first time there is some."""
    from ..store import Store

    if not settings.db_path.exists():
        return None
    store = Store(settings.db_path)
    try:
        if store.get_meta(HINT_SHOWN) is not None:
            return None
        waiting = [h for h in store.history() if h[2] < h[1]]
        if not waiting:
            return None
        store.set_meta(HINT_SHOWN, repr(time.time()))
    finally:
        store.close()
    return (f"Lore found {len(waiting)} transcript(s) from before it was installed and will not "
            "read them on its own; the user can run `lore ingest` to add them to memory (it "
            "shows the token cost and asks first).")


@dataclass
class Estimate:
    transcripts: int = 0
    turns: int = 0
    batches: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    output_measured: bool = False  # output per call from the ledger, not assumed
    cost_usd: float | None = None
    model: str = ""

    def lines(self) -> list[str]:
        cost = ("an unknown cost (no list price for this model)" if self.cost_usd is None
                else f"about ${self.cost_usd:.2f}")
        per_call = "measured" if self.output_measured else "assumed"
        return [f"{self.transcripts} transcript(s), {self.turns:,} turns in {self.batches:,} "
                f"extraction call(s) to {self.model}",
                f"about {self.input_tokens:,} input and {self.output_tokens:,} output tokens "
                f"(output per call {per_call}): {cost} at list price"]


def _overhead_tokens(topic_names: list[str]) -> int:
    from .extract import RECORD_KNOWLEDGE_TOOL, build_prompt

    system, prompt = build_prompt("", topic_names)
    chars = len(system) + len(prompt) + len(json.dumps(RECORD_KNOWLEDGE_TOOL))
    return TOOL_USE_OVERHEAD + round(chars / CHARS_PER_TOKEN)


def _output_per_call(settings: Settings) -> int | None:
    """The mean output of the extraction calls recorded so far, when there are a few."""
    from ..store import Store

    if not settings.db_path.exists():
        return None
    store = Store(settings.db_path, readonly=True)
    try:
        rows = [r for r in store.usage_since(0.0) if r[0] == "extraction"]
    finally:
        store.close()
    if not rows or rows[0][1] < 3:
        return None
    return round(rows[0][3] / rows[0][1])


def estimate(settings: Settings, parts: list[tuple[Path, int, int | None]],
             topic_names: list[str]) -> Estimate:
    """What ingesting `parts` (transcript, from offset, to offset or None for the end) would
    send: the same slices the ingestor makes, with tokens estimated from characters."""
    from ..llm.usage import estimated_cost
    from .batches import MAX_PROMPT_CHARS, read_batch
    from .extract import worth_extracting
    from .known import TOPICS_SENT

    result = Estimate(model=settings.claude_model)
    overhead = _overhead_tokens(topic_names[:TOPICS_SENT])  # at most as many as a call lists
    files = set()
    for path, start, end in parts:
        offset = start
        while end is None or offset < end:
            delta, text = read_batch(path, offset, settings.batch_bytes,
                                     None if end is None else end - offset)
            if delta.missing or delta.truncated or delta.end_offset <= offset:
                break
            result.turns += sum(1 for t in delta.turns if t.role != "tool")
            files.add(path)
            if text and worth_extracting(delta.turns):
                result.batches += 1
                result.input_tokens += overhead + round(
                    len(text[:MAX_PROMPT_CHARS]) / CHARS_PER_TOKEN)
            offset = delta.end_offset
    result.transcripts = len(files)
    measured = _output_per_call(settings)
    result.output_measured = measured is not None
    result.output_tokens = result.batches * (measured or ASSUMED_OUTPUT_TOKENS)
    result.cost_usd = estimated_cost(settings.claude_model, result.input_tokens,
                                     result.output_tokens)
    return result
