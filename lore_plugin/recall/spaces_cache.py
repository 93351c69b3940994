"""The hub spaces' part of the brief, kept on disk per project (issue 28/29): what the
SessionStart hook shows when no memory service answers, so that it never imports the
PostgreSQL driver nor connects. The memory service writes it each time it reads a space for
a brief (service/spaces_brief.py); the hook only reads it.

One owner-only JSON file per project under `LORE_HOME/briefs/` (0600 in a 0700 folder),
replaced whole: a reader sees the old file or the new one. Its shape:
    {"hub": {space: {"items": [[rank, id, line], ...], "at": epoch seconds}},
     "team": {"space": name, "lines": [...], "at": epoch seconds} or absent}
Anything else in the file (an older shape, a damaged file) reads as no cache.

Standard library only: the hook imports it."""

from __future__ import annotations

import json
import os

FOLDER = "briefs"
MAX_BYTES = 1 << 20


def cache_path(home: str, project: str | None) -> str:
    import hashlib

    digest = hashlib.sha256((project or "").encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return os.path.join(home, FOLDER, f"{digest}.json")


def _items(value: object) -> list[list] | None:
    if not isinstance(value, list):
        return None
    ok = all(isinstance(i, list) and len(i) == 3 and isinstance(i[0], (int, float))
             and isinstance(i[1], str) and isinstance(i[2], str) for i in value)
    return value if ok else None


def _read_part(part: object, fields: tuple[str, ...]) -> bool:
    """A part that was read: its rows (`fields`) and when; a part the memory service could
    not read now (its answer, not the file) has an "error" instead, and may have neither."""
    if not isinstance(part, dict) or ("error" in part and not isinstance(part["error"], str)):
        return False
    if "error" in part and "at" not in part:
        return all(name not in part for name in fields)
    if not isinstance(part.get("at"), (int, float)):
        return False
    if "items" in fields:
        return _items(part.get("items")) is not None
    lines = part.get("lines")
    return isinstance(lines, list) and all(isinstance(x, str) for x in lines)


def valid(data: object) -> dict | None:
    """`data` when it has the shape above (checked item by item), else None. The memory
    service answers in the same shape, with "error" on a part it could not read now."""
    if not isinstance(data, dict) or not isinstance(data.get("hub", {}), dict):
        return None
    if not all(_read_part(part, ("items",)) for part in data.get("hub", {}).values()):
        return None
    team = data.get("team")
    if team is not None and not (isinstance(team, dict) and isinstance(team.get("space"), str)
                                 and _read_part(team, ("lines",))):
        return None
    return data


def read(home: str, project: str | None) -> dict | None:
    """The project's cached part, or None (none yet, unreadable, or not of this shape)."""
    try:
        fd = os.open(cache_path(home, project), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            return valid(json.loads(fh.read(MAX_BYTES)))
    except (OSError, ValueError):
        return None


def write(home: str, project: str | None, data: dict) -> None:
    """Replaces the project's cached part (owner-only, whole or not at all)."""
    path = cache_path(home, project)
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    temp = f"{path}.tmp-{os.getpid()}-{id(data)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(data))
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
