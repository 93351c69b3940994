"""The brief's hub part (issues 28, 29): the knowledge of the hub spaces the user reads, named
by space, and the team space of the session's repository, each line with its author.

The hook never opens PostgreSQL itself (the driver's import and a connection cost 0.45 s of a
150 ms budget). It asks the running memory service (service/spaces_brief.py), which keeps the
connections open, on a thread started before the local file is read, and waits for it until
SERVICE_WAIT after that start. When no service answers, the part last read for this project
(recall/spaces_cache.py, owner-only, written by the service) is shown with its age, and a
detached job (the worker's `spaces-brief`) starts the service and reads the hub for the next
brief; with no cache either, the brief says the hub part is not ready. So a hub that is down
or slow costs the hook at most SERVICE_WAIT, and never the connect timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..core.config import Settings
from ..recall import spaces_cache
from ..recall.render import clip
from ..safety.frame import neutralise

Item = tuple[float, str, str]  # (rank, id, line), as recall.brief_items.knowledge_items gives
SERVICE_WAIT = 0.3  # seconds from the hook's question; the service itself waits 0.12 s
NOT_READY = ("Lore hub spaces' knowledge is not in this brief yet: the memory service that "
             "reads them is starting; the next session's brief has it.")


class HubPart:
    """What the brief adds: hub items to rank with the local ones, the team's lines (its
    heading first), and notes for the brief's tail (what is stale or missing, and why)."""

    def __init__(self, items: list[Item] | None = None, team: list[str] | None = None,
                 notes: list[str] | None = None) -> None:
        self.items, self.team, self.notes = items or [], team or [], notes or []


def _ago(at: float) -> str:
    minutes = max(0, int((time.time() - at) // 60))
    if minutes < 1:
        return "less than a minute ago"
    if minutes < 120:
        return f"{minutes} min ago"
    return f"{minutes // 60} h ago" if minutes < 2880 else f"{minutes // 1440} days ago"


def _ask(settings: Settings, cwd: str | None, answer: list[dict[str, Any]]) -> None:
    try:
        from ..recall.prompt_socket import exchange
        from ..service.client import announced
        from ..service.protocol import PROTOCOL, plugin_version

        info = announced(str(settings.home), str(settings.db_path))
        if info is None or info.get("protocol") != PROTOCOL:
            return
        found = exchange(info, {"protocol": PROTOCOL, "version": plugin_version(),
                                "op": "spaces_brief", "args": {"cwd": cwd}},
                         time.monotonic() + SERVICE_WAIT)
        if found is not None and spaces_cache.valid(found) is not None:
            answer.append(found)
    except Exception:  # noqa: BLE001 - no service, a dead one, a garbled answer: the cache
        pass


def hub_part(settings: Settings, cwd: str | None, project: str | None,
             refresh: Callable[[], None] | None = None) -> Callable[[], HubPart]:
    """Starts asking the service now; what it returns gives the part, by SERVICE_WAIT.
    `refresh` (the hook's: a detached job) is called when no service answered."""
    if not settings.hub_url:
        return HubPart
    answer: list[dict[str, Any]] = []
    asking = threading.Thread(target=_ask, args=(settings, cwd, answer), daemon=True,
                              name="lore-brief-hub")
    started = time.monotonic()
    asking.start()

    def collect() -> HubPart:
        asking.join(max(SERVICE_WAIT - (time.monotonic() - started), 0.0))
        if answer:
            try:
                return _part(answer[0])
            except (TypeError, ValueError, AttributeError):  # an answer of another shape
                pass
        cached = spaces_cache.read(str(settings.home), project)
        if refresh is not None:
            try:
                refresh()
            except Exception:  # noqa: BLE001 - best effort: the next session tries again
                pass
        try:
            part = _part(cached) if cached is not None else None
        except (TypeError, ValueError, AttributeError):  # checked on reading; never trusted
            part = None
        if part is None or cached is None:
            return HubPart(notes=[NOT_READY])
        ages = [p["at"] for p in [*cached.get("hub", {}).values(), cached.get("team") or {}]
                if "at" in p]
        when = _ago(min(ages)) if ages else "an earlier session"
        part.notes.insert(0, f"Lore hub spaces' knowledge in this brief was read {when}: the "
                             "memory service was not running (it is starting now).")
        return part

    return collect


def _part(data: dict[str, Any]) -> HubPart:
    part = HubPart()
    for space, found in (data.get("hub") or {}).items():
        part.items += [(float(r), str(i), str(line)) for r, i, line in found.get("items", [])]
        why = found.get("error")
        if why and "at" in found:
            part.notes.append(f"Lore hub space {space} did not answer ({clip(why, 160)}); its "
                              f"knowledge here was read {_ago(found['at'])}.")
        elif why:
            part.notes.append(f"Lore hub space {space} not reached, its knowledge is not in "
                              f"this brief: {clip(why, 200)}")
    team = data.get("team")
    if isinstance(team, dict):
        part.team = [str(line) for line in team.get("lines", [])]
        why = team.get("error")
        if why and not part.team:
            part.team = [f"Team space {team.get('space')} not reached: "
                         f"{clip(neutralise(str(why)), 160)}"]
        elif why and "at" in team:
            part.notes.append(f"Lore team space {team.get('space')} did not answer; its "
                              f"notes here were read {_ago(team['at'])}.")
    part.items.sort(key=lambda item: item[0], reverse=True)
    return part
