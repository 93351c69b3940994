"""The hub spaces' part of the SessionStart brief, read by the memory service (issues 28, 29):
the knowledge of each hub space the user reads, and the team space of the session's
repository with each line's author. The service keeps one open HubStore per space, so the
hook pays neither the driver's import nor a connection (0.45 s of the hook's 0.7 s before).

Each part is read on a daemon thread, and a request waits for it only `wait` seconds (a
hook's request: WAIT): a part that has not answered by then is answered from the part last
read (spaces_cache, on disk, named with its age) and its read goes on, so a slow hub costs
the hook nothing and the next brief is fresh. A part whose read is still running is not read
twice. Every read that succeeds replaces the project's cached part, which is what the hook
shows when no service runs (hooks/brief_spaces.py)."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from ..core.config import Settings
from ..recall import spaces_cache
from ..recall.brief_items import knowledge_items, team_lines

log = logging.getLogger("lore.service")
WAIT = 0.12  # seconds a hook's request waits for the hub before answering from the cache
MAX_WAIT = 30.0  # a refresh (the worker's request) may wait this long at most
REFRESH_WAIT = 10.0  # what a refresh asks for: the hub's connect timeout and the reads
KEEP_ITEMS = 40  # per space: the brief shows about a dozen lines of knowledge in all
HUB, TEAM = "hub", "team"


class _Read:
    """One part's read: its value or one line saying why it failed, and when it is done."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: dict[str, Any] | None = None
        self.error: str | None = None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


class SpacesBrief:
    """The parts for one Lore home's settings; safe to call from several threads at once."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = str(settings.home)
        self._stores: dict[str, Any] = {}  # space -> its open HubStore
        self._reads: dict[tuple[str, str, str | None], _Read] = {}
        self._lock = threading.Lock()  # the two dicts
        self._opening = threading.Lock()  # one connect at a time: all spaces are one hub's
        self._file = threading.Lock()  # read-modify-write of a cached part

    def parts(self, cwd: object) -> tuple[str | None, list[tuple[str, str]]]:
        """(the project of the folder `cwd`, its parts: (HUB, space) per space read, and
        (TEAM, space) when its repository shares into one)."""
        from ..core.project import project_key
        from ..core.teamconfig import team_space

        folder = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else None
        project = project_key(folder) if folder else None
        found = [(HUB, space) for space in self.settings.hub_spaces]
        if folder and os.path.isdir(folder):
            space, _warnings = team_space(self.settings.hub_url, self.settings.share_overrides,
                                          folder)
            if space is not None:
                found.append((TEAM, space))
        return project, found

    def answer(self, cwd: object, wait: float = WAIT) -> dict[str, Any]:
        """The parts as spaces_cache holds them, each fresh or else the last one read (with
        "error": why it is not fresh, and no "items"/"lines" when none was ever read)."""
        project, parts = self.parts(cwd)
        reads = {part: self._start(part, project) for part in parts}
        deadline = time.monotonic() + max(0.0, min(wait, MAX_WAIT))
        cached = spaces_cache.read(self.home, project) or {}
        out: dict[str, Any] = {"hub": {}, "project": project}
        for (kind, space), read in reads.items():
            if read.done.wait(max(deadline - time.monotonic(), 0.0)) and read.value is not None:
                part = dict(read.value)
            else:
                old = (cached.get("hub", {}).get(space) if kind == HUB
                       else cached.get("team") if (cached.get("team") or {}).get("space") == space
                       else None)
                part = dict(old) if old else ({"space": space} if kind == TEAM else {})
                part["error"] = read.error or f"no answer within {wait:g} s"
            if kind == HUB:
                out["hub"][space] = part
            else:
                out["team"] = part
        return out

    def warm(self, cwd: object) -> None:
        """Starts reading the folder's parts now (a session's front, at its start), so that
        the store is open and the cache fresh when its hook asks."""
        project, parts = self.parts(cwd)
        for part in parts:
            self._start(part, project)

    def _start(self, part: tuple[str, str], project: str | None) -> _Read:
        key = (*part, project)
        with self._lock:
            read = self._reads.get(key)
            if read is not None and not read.done.is_set():
                return read  # one read at a time per part: a hung hub piles up nothing
            read = self._reads[key] = _Read()
        threading.Thread(target=self._run, args=(part, project, read), daemon=True,
                         name=f"lore-brief-{part[1]}").start()
        return read

    def _run(self, part: tuple[str, str], project: str | None, read: _Read) -> None:
        kind, space = part
        try:
            store = self._store(space)
            now = time.time()
            if kind == HUB:
                read.value = {"items": [list(item) for item in
                                        knowledge_items(store, project, space)[:KEEP_ITEMS]],
                              "at": now}
            else:
                read.value = {"space": space, "lines": team_lines(store, space, project),
                              "at": now}
            self._save(project, kind, space, read.value)
        except Exception as exc:  # noqa: BLE001 - any failure is a part not read, said so
            read.error = _one_line(exc)
            log.warning("brief: %s space %s not read: %s", kind, space, read.error)
            self._drop(space)
        finally:
            read.done.set()

    def _store(self, space: str) -> Any:
        with self._lock:
            store = self._stores.get(space)
        if store is not None:
            return store
        with self._opening:
            with self._lock:
                store = self._stores.get(space)
            if store is None:
                from ..capture.hub_link import open_store

                store = open_store(self.settings, space)
                with self._lock:
                    self._stores[space] = store
        return store

    def _drop(self, space: str) -> None:
        with self._lock:
            store = self._stores.pop(space, None)
        if store is not None:
            try:
                store.close()
            except Exception:  # noqa: BLE001 - already broken: closing is best effort
                pass

    def _save(self, project: str | None, kind: str, space: str, value: dict[str, Any]) -> None:
        with self._file:
            data = spaces_cache.read(self.home, project) or {}
            data.setdefault("hub", {})
            if kind == HUB:
                data["hub"][space] = value
            else:
                data["team"] = value
            try:
                spaces_cache.write(self.home, project, data)
            except OSError as exc:  # only a cache: the next brief asks again
                log.warning("brief cache not written: %s", exc)

    def close(self) -> None:
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            try:
                store.close()
            except Exception:  # noqa: BLE001 - closing at exit is best effort
                pass


def refresh(settings: Settings, cwd: str | None) -> dict[str, int]:
    """The worker's job after a brief found no service: the running service reads the
    parts (started if none runs, so the next hook finds it), or, when no service can be
    had, this process does. Either way the cache is rewritten."""
    from .client import ServiceClient, Unavailable

    client = ServiceClient(str(settings.home), str(settings.db_path))
    try:
        answer = client.request("spaces_brief", {"cwd": cwd, "wait": REFRESH_WAIT})
        by_service = 1
    except Unavailable as exc:
        log.info("brief refresh in-process: %s", exc)
        brief = SpacesBrief(settings)
        try:
            answer, by_service = brief.answer(cwd, REFRESH_WAIT), 0
        finally:
            brief.close()
    finally:
        client.close()
    parts = [*answer.get("hub", {}).values(), *([answer["team"]] if answer.get("team") else [])]
    return {"by_service": by_service, "parts": len(parts),
            "failed": sum(1 for p in parts if "error" in p)}
