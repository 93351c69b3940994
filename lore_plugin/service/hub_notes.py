"""The hub spaces behind the per-prompt notes (issue 28): one warm SpaceNotes per hub space
the user reads, opened in the background when the service starts, so that a prompt finds
each space's connection, plans and vector path ready (recall/space_notes.py). A space that is
also the team space of the asking repository is left to the team's notes, which name the
author of every note."""

from __future__ import annotations

import threading

from ..core.config import Settings
from ..recall.memory import Memory
from ..recall.space_notes import SpaceNotes
from ..recall.team_notes import PromptVector


class HubNotes:
    def __init__(self, settings: Settings | None, memory: Memory, warm: threading.Event) -> None:
        self._spaces: dict[str, SpaceNotes] = {}
        if settings is None or not settings.hub_url or not settings.recall_on_prompt:
            return
        from ..capture.hub_link import open_memory

        if memory.embedder is not None and not isinstance(memory.embedder, PromptVector):
            memory.embedder = PromptVector(memory.embedder)  # one embedding a prompt for all
        for space in settings.hub_spaces:
            self._spaces[space] = SpaceNotes(
                space, lambda space=space: open_memory(settings, space, memory.embedder,  # type: ignore[misc]
                                                       memory.clock, memory.project), warm)
            self._spaces[space].open_soon()

    def for_prompt(self, team_space: str | None) -> list[SpaceNotes]:
        """The spaces a prompt reads: all but the repository's team space."""
        return [notes for space, notes in self._spaces.items() if space != team_space]

    def close(self) -> None:
        spaces, self._spaces = list(self._spaces.values()), {}
        for notes in spaces:
            notes.close()
