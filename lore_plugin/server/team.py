"""The in-process server's other spaces for the per-prompt notes: the team space its
repository shares into (issue 29, core/teamconfig.py; recall/team_notes.py) and, with a hub,
the hub spaces the user reads (issue 28; recall/space_notes.py), as the memory service
fuses them (service/ops.py `prompt`), so that `LORE_SERVICE=off` loses neither."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from ..core.config import Settings
from ..recall import prompt_recall
from ..recall.memory import Memory
from ..recall.space_notes import answer_with_spaces
from ..service.hub_notes import HubNotes
from ..service.team import team_notes

log = logging.getLogger("lore.server")


def open_socket(settings: Settings, lock: threading.Lock, memory: Memory,
                warm: threading.Event) -> Callable[[], None]:
    """prompt_recall.open_socket with the team space of the server's folder and the hub
    spaces (each opened in the background); what it returns closes them all."""
    team = (team_notes(settings, os.getcwd(), memory, warm) if settings.recall_on_prompt
            else None)
    spaces = HubNotes(settings, memory, warm)  # nothing without a hub or with on_prompt off
    hubs = spaces.for_prompt(team.space if team is not None else None)
    if hubs or team is not None:
        close = prompt_recall.open_socket(
            settings, lock, memory, warm,
            lambda mem, request, is_warm: answer_with_spaces(mem, hubs, team, request, is_warm))
    else:
        close = prompt_recall.open_socket(settings, lock, memory, warm)

    def close_all() -> None:
        close()
        spaces.close()
        if team is not None:
            team.close()

    return close_all
