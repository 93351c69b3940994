"""Writing cues for notes that have none (issue 30; phase 3d, after the other LLM phases).
Cues (core/cues.py) are written by whoever stores a note: the extraction model, or the agent
calling store_memory(cues=...). An agent may give none, and every note stored before cues
existed has none; yet cues are what a note is found by when it is asked for in other words
(bench/README.md "Cues beside each note"). This phase asks the LLM for them.

- Due: live facts and details (depth 2 and below) whose cues are empty and that this phase
  has not asked about yet (Store.without_cues, newest first, at most a run's worth read).
  A note the model gave nothing usable for is marked (core/cues.CUES_ASKED_AT), so it is not
  asked again every cycle.
- One call_tool prompt a batch, each note shown as its heading path, summary and clipped
  content, framed as data and redacted before it leaves, with the instruction extraction
  uses for cues (capture/prompt.CUE_RULE). The answer is validated, each phrase checked
  (no markup, not too long), normalised (clean_cues) and redacted; unknown ids are ignored.
- The write sets only cues, under the write lock, and only on a note still live and still
  without cues: a person or a store that gave some meanwhile is never overwritten. Cues are
  not in a note's vector, so nothing is re-embedded."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from ..capture.prompt import CUE_RULE
from ..core.cues import CUE_CHARS, CUES_ASKED_AT, clean_cues
from ..core.types import Fragment
from ..llm.client import LLM
from ..recall.prompt_candidates import paths
from ..recall.render import clip
from ..safety.redact import redact
from ..store import Store
from .llm_phases import DATA_CLAUSE, MAX_CALLS, Activity, PhaseOutcome, answers, due_only, per_item_tool

NOTES_PER_CALL = 20
CONTENT_SHOWN = 300  # characters of a note's content in the prompt
CUE_WORDS = 8  # a phrase longer than this is a sentence, not a way to ask
LISTED = 50
# Markup and control characters ask for nothing, and a cue is stored text: keep them out.
_UNSAFE = re.compile(r"[<>{}\[\]`|\\]|[\x00-\x1f\x7f]")

CUES_SYSTEM = (
    "You help a long-term memory find its notes again. For each note below, write its cues: "
    + CUE_RULE + " The heading path and summary say what the note is about; the content gives "
    "its specifics. Call record_cues once, with one entry per note id (n1, n2, ...); give an "
    "empty list for a note no one would ask for. " + DATA_CLAUSE)
CUES_TOOL = per_item_tool(
    "record_cues", "The cues of each note, keyed by its local id.", "notes", "cues",
    {"type": "array", "items": {"type": "string"}, "description": "3 to 6 short phrases"}, "n1")


class _NoteCues(BaseModel):
    id: str
    cues: list[Any]  # a phrase that is not text is dropped, not the whole answer


class _Answer(BaseModel):
    notes: list[_NoteCues]


def checked_cues(given: list[Any]) -> str:
    """The model's phrases as stored cues: text only, no markup, none longer than a stored
    phrase may be (refused, not cut: a cut sentence asks for nothing), none that redaction
    would change (a secret is no way to ask)."""
    return clean_cues([p for p in given if isinstance(p, str) and not _UNSAFE.search(p)
                       and len(" ".join(p.split())) <= CUE_CHARS
                       and len(p.split()) <= CUE_WORDS and redact(p) == p])


def _block(local: str, note: Fragment, path: str) -> str:
    lines = [f"Note {local}: {clip(note.summary, 200)}"]
    if path:
        lines.append(f"Under: {path}")
    if note.content and note.content != note.summary:
        lines.append(f"Content: {clip(note.content, CONTENT_SHOWN)}")
    return "\n".join(lines)


def write_cues(store: Store, activity: Activity, llm: LLM | None, now: float,
               dry_run: bool) -> PhaseOutcome:
    """`activity` is unused: the phases share one signature (cycle.py)."""
    due = store.without_cues(MAX_CALLS * NOTES_PER_CALL)
    if dry_run or llm is None:
        return due_only(store, due)
    outcome = PhaseOutcome(due=len(due))
    notes: dict[str, Fragment] = {}
    shown: dict[str, str] = {}

    def load(batch: list[str]) -> None:
        missing = [fid for fid in batch if fid not in notes]
        if missing:
            found = store.get_many(missing, with_parent=False)
            notes.update(found)
            shown.update(paths(store, list(found.values())))

    def render(batch: list[str]) -> str:
        load(batch)
        return "\n\n".join(_block(f"n{i + 1}", notes[f], shown.get(f, ""))
                           for i, f in enumerate(batch))

    def readable() -> Iterator[str]:
        for fid in due:
            load([fid])
            if fid in notes:  # forgotten since the due read: nothing to ask
                yield fid

    for batch, parsed in answers(llm, outcome, readable(), render, NOTES_PER_CALL, CUES_SYSTEM,
                                 CUES_TOOL, _Answer, "cues"):
        local = {f"n{i + 1}": fid for i, fid in enumerate(batch)}
        given: dict[str, str] = {}
        for item in parsed.notes[:len(local)]:
            fid = local.get(item.id.strip())
            if fid is not None and fid not in given:  # unknown ids and repeats ignored
                given[fid] = checked_cues(item.cues)
                if item.cues and not given[fid]:
                    outcome.rejected += 1
        _write(store, batch, given, notes, now, outcome)
    return outcome


def _write(store: Store, batch: list[str], given: dict[str, str], notes: dict[str, Fragment],
           now: float, outcome: PhaseOutcome) -> None:
    """Writes each note's cues if it is still live and still without any, and marks every
    note of the batch the model gave nothing usable for."""
    with store.write():
        current = store.get_many(batch, with_parent=False)
        for fid in batch:
            note = current.get(fid)
            if note is None or note.superseded_by or note.cues:
                continue  # forgotten, merged, or given cues meanwhile: theirs stand
            cues = given.get(fid, "")
            if not cues:
                meta = dict(note.metadata)
                meta[CUES_ASKED_AT] = now
                store.set_metadata(fid, meta)
                continue
            store.update_text(fid, cues=cues)
            outcome.done += 1
            if len(outcome.items) < LISTED:
                outcome.items.append(f"'{clip(notes[fid].summary, 60)}': "
                                     + "; ".join(cues.splitlines()))
