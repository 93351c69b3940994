"""The brief's team part (issue 29): in a repository that shares into a team space, the
space's most important knowledge of this project, each line with its author, the role the
database stamped on it ("from: alice, stated").

Trust is the brief's own rule (team_notes.trusted, as brief.trusted_for_brief): what an
agent stored or the extractor inferred enters only once someone confirmed it. The lines are
inside the brief's data frame and neutralised like every recalled line, so a teammate's text
cannot forge the frame. The hub is asked on a daemon thread with a deadline: a hub that is
down or slow costs the session start at most that, and the brief says the space was not
reached."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..core.config import Settings
from ..recall.render import authored_label, clip, short_id
from ..safety.frame import neutralise

CANDIDATES = 60
# Seconds from the session's start for the team space, read beside the rest of the brief: a
# hook process must import the driver and connect first (0.3 s on a quiet machine, more than
# 1 s on this shared one under load); a hub that is down costs the session start this much.
TEAM_DEADLINE = 2.0
ITEM_CHARS = 160


def team_lines(settings: Settings, cwd: str | None, project: str | None
               ) -> Callable[[], list[str]]:
    """Starts reading the team space now, while the brief reads the rest; what it returns
    gives the heading and one line per note, best first ([] when the repository shares
    nothing; one line saying so when the space was not read by TEAM_DEADLINE)."""
    if not settings.hub_url or not cwd:
        return list
    from ..core.teamconfig import team_space

    space, _warnings = team_space(settings.hub_url, settings.share_overrides, cwd)
    if space is None:
        return list
    answer: list[list[str]] = []
    failed: list[str] = []

    def read() -> None:
        try:
            answer.append(_read(settings, space, project))
        except Exception as exc:  # noqa: BLE001 - the brief must come whatever the hub does
            failed.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    started = time.monotonic()
    worker = threading.Thread(target=read, name="lore-team-brief", daemon=True)
    worker.start()

    def collect() -> list[str]:
        worker.join(max(TEAM_DEADLINE - (time.monotonic() - started), 0.0))
        if answer:
            return answer[0]
        why = failed[0] if failed else f"no answer within {TEAM_DEADLINE:g} s"
        return [f"Team space {space} not reached: {clip(neutralise(why), 160)}"]

    return collect


def _read(settings: Settings, space: str, project: str | None) -> list[str]:
    from ..capture.hub_link import open_store
    from ..recall.team_notes import trusted

    store = open_store(settings, space)
    try:
        rows = [f for f, _, _ in store.knowledge_of(project, CANDIDATES) if trusted(f)]
        authors = store.authors([f.id for f in rows])
    finally:
        store.close()
    lines = []
    for f in rows:
        text = f.summary
        if f.content and f.content.strip() != f.summary.strip():
            text += " — " + f.content
        author = neutralise(authors.get(f.id, "unknown"))
        lines.append(f"- [{short_id(f.id)}] {clip(neutralise(text), ITEM_CHARS)} "
                     f"({authored_label(f, author)})")
    return [f"From the team space {space}:", *lines] if lines else []
