"""The team spaces behind the per-prompt notes (issue 29). A repository that shares into a
team space (core/teamconfig.py) gets that space's notes after the member's own
(recall/team_notes.py). An in-process server reads the one space of its own folder; the
memory service serves every session of the machine, so it finds the space from each
request's folder and keeps one warm TeamNotes per space."""

from __future__ import annotations

import logging
import os
import threading

from ..core.config import Settings
from ..recall.memory import Memory
from ..recall.team_notes import PromptVector, TeamNotes

log = logging.getLogger("lore.server")


def team_notes(settings: Settings, cwd: str, memory: Memory,
               warm: threading.Event | None = None) -> TeamNotes | None:
    """The team space of the repository at `cwd`, opening in the background; None when the
    repository shares nothing."""
    from ..core.teamconfig import team_space

    space, warnings = team_space(settings.hub_url, settings.share_overrides, cwd)
    for warning in warnings:
        log.warning("%s", warning)
    if space is None:
        return None
    from ..capture.hub_link import open_memory

    if memory.embedder is not None and not isinstance(memory.embedder, PromptVector):
        memory.embedder = PromptVector(memory.embedder)  # one embedding a prompt for both
    notes = TeamNotes(space, lambda: open_memory(settings, space, memory.embedder,
                                                 memory.clock, memory.project), warm)
    notes.open_soon()
    return notes


class TeamSpaces:
    """The service's team spaces, one per space, found from the folder a request names."""

    def __init__(self, settings: Settings | None, memory: Memory, warm: threading.Event) -> None:
        self._settings, self._memory, self._warm = settings, memory, warm
        self._spaces: dict[str, TeamNotes] = {}
        self._lock = threading.Lock()

    def for_folder(self, cwd: object) -> TeamNotes | None:
        """The team notes of the repository at `cwd` (a session's folder, from its hook), or
        None: no hub, per-prompt recall off, not an absolute folder, or nothing shared."""
        settings = self._settings
        if (settings is None or not settings.hub_url or not settings.recall_on_prompt
                or not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd)):
            return None
        from ..core.teamconfig import team_space

        space, _warnings = team_space(settings.hub_url, settings.share_overrides, cwd)
        if space is None:
            return None
        with self._lock:
            notes = self._spaces.get(space)
            if notes is None:
                notes = team_notes(settings, cwd, self._memory, self._warm)
                if notes is None:
                    return None
                self._spaces[space] = notes
        notes.open_soon()  # no-op when open; retried after a failure
        return notes

    def close(self) -> None:
        with self._lock:
            spaces, self._spaces = list(self._spaces.values()), {}
        for notes in spaces:
            notes.close()
