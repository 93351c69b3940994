"""The hub spaces' part of the per-prompt notes (issue 28, "the other surfaces"): the memory
service also looks in each hub space the user reads for knowledge that answers the prompt,
by the same rules as in the local file (prompt_recall.py), and fuses what it finds with the
local notes in one data frame; each hub note names its space.

A hub space is opened and warmed on a daemon thread (TeamNotes's machinery), never on a
prompt's clock: until it is open, or while it cannot be reached (retried after RETRY_AFTER),
it adds nothing and costs nothing. A prompt waits for the spaces only until NOTES_DEADLINE.
A hub space can hold other roles' rows (a team space the user also reads): those are shown
only when trusted, as in the brief, and with their author."""

from __future__ import annotations

import threading
import time

from ..core.types import Fragment
from ..safety.frame import neutralise
from . import prompt_recall as pr
from . import render
from .memory import Memory
from .team_notes import TeamNotes, note_line, team_line, trusted

NOTES_DEADLINE = 0.15  # seconds a prompt's answer waits for the hub and team spaces


class SpaceNotes(TeamNotes):
    """One hub space the user reads: `found` gives (note, its author, or "" for the user's
    own rows)."""

    _me: str | None = None  # the role this machine connects as, asked once

    def kept(self, space: Memory, frags: list[Fragment], authors: dict[str, str]
             ) -> list[Fragment]:
        if self._me is None and frags:
            self._me = str(space.reader.role())  # type: ignore[attr-defined]
        return [f for f in frags if authors.get(f.id) == self._me or trusted(f)]

    def found(self, prompt: str, seen: set[str], warm: bool, project: str | None = None
              ) -> list[tuple[Fragment, str]]:
        return [(f, "" if author == self._me else author)
                for f, author in super().found(prompt, seen, warm, project)]


def space_line(frag: Fragment, space: str, author: str, room: int) -> str | None:
    """One hub note in at most `room` characters: id, text, how it was known (and by whom,
    when another role wrote it), its date and its space."""
    label = (render.authored_label(frag, neutralise(author)) if author
             else f"from: {render.source_label(frag)}")
    return note_line(frag, f"{label}, {render.when(frag.created_at)}, "
                           f"space: {neutralise(space)}", room)


def answer_with_spaces(memory: Memory, hubs: list[SpaceNotes], team: TeamNotes | None,
                       request: dict, warm: bool, project: str | None = None) -> dict:
    """prompt_recall.answer over the local file and the hub spaces, fused, then the team's
    notes in the room left (with no hub space: the member's own notes, then the team's).
    The fusion: every space's notes passed the same bar (the judge), so they are taken rank
    by rank, the local file's first at each rank; a fragment in two spaces (pushed or
    pulled) is shown once."""
    prompt, seen = request.get("prompt"), request.get("seen")
    if not isinstance(prompt, str) or not prompt.strip():
        return pr.answer(memory, request, warm)
    seen_ids = {s for s in seen if isinstance(s, str)} if isinstance(seen, list) else set()
    started = time.monotonic()
    if warm:  # embedded once, here, for every space (PromptVector)
        memory.embed_one(prompt[:pr.MAX_PROMPT])
    sources: list[TeamNotes] = [*hubs, *([team] if team is not None else [])]
    found: dict[int, list[tuple[Fragment, str]]] = {}

    def ask(i: int, notes: TeamNotes) -> None:
        found[i] = notes.found(prompt, seen_ids, warm, project)

    asking = [threading.Thread(target=ask, args=(i, notes), daemon=True, name="lore-notes")
              for i, notes in enumerate(sources)]
    for thread in asking:
        thread.start()
    own = pr.answer(memory, request, warm)
    for thread in asking:
        thread.join(max(NOTES_DEADLINE - (time.monotonic() - started), 0.0))
    own_frags = memory.reader.get_many(own["ids"]) if own["ids"] else {}
    where = pr.paths(memory.reader, list(own_frags.values())) if own_frags else {}
    Note = tuple[Fragment, str, str | None]  # the note, its author ("": the user), its space
    ranked: list[list[Note]] = [[(own_frags[i], "", None) for i in own["ids"] if i in own_frags]]
    ranked += [[(f, a, notes.space) for f, a in found.get(i, [])] for i, notes in enumerate(hubs)]
    fused = [column[r] for r in range(max(map(len, ranked))) for column in ranked
             if r < len(column)]
    fused += [(f, a, None) for f, a in found.get(len(hubs), [])] if team is not None else []
    shown: dict[str, tuple[str, str | None]] = {}
    order: list[Fragment] = []
    for frag, author, space in fused:
        if frag.id not in shown:
            shown[frag.id] = (author, space)
            order.append(frag)
    if len(order) == len(own["ids"]):
        return own  # nothing from the hub: the local answer as it was

    def line(frag: Fragment, room: int) -> str | None:
        author, space = shown[frag.id]
        if space is not None:
            return space_line(frag, space, author, room)
        if author:
            return team_line(frag, author, room)
        return pr.item_line(frag, room, where.get(frag.id, ""))

    lines: list[str] = []
    ids: list[str] = []
    pr.fill(order, line, lines, ids, pr.BUDGET)
    if not lines:
        return own
    return {"context": render.recalled("\n".join(lines), pr.NOTICE), "ids": ids,
            "judged_by": own.get("judged_by")}
