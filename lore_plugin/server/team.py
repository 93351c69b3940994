"""The in-process server's team space (issue 29): when the server's repository shares into
one (core/teamconfig.py), the per-prompt notes also come from it (recall/team_notes.py)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from ..core.config import Settings
from ..recall import prompt_recall
from ..recall.memory import Memory
from ..recall.team_notes import answer_with_team
from ..service.team import team_notes

log = logging.getLogger("lore.server")


def open_socket(settings: Settings, lock: threading.Lock, memory: Memory,
                warm: threading.Event) -> Callable[[], None]:
    """prompt_recall.open_socket with the team space of the server's folder; what it returns
    closes both."""
    team = (team_notes(settings, os.getcwd(), memory, warm) if settings.recall_on_prompt
            else None)
    if team is None:
        return prompt_recall.open_socket(settings, lock, memory, warm)
    close = prompt_recall.open_socket(
        settings, lock, memory, warm,
        lambda mem, request, is_warm: answer_with_team(mem, team, request, is_warm))

    def close_both() -> None:
        close()
        team.close()

    return close_both
