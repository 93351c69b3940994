"""The user's off switches: `[ingestion] enabled = false`, `lore pause` / `lore resume`, and
projects opted out by a path or glob in the config or by a `.lore-ignore` file at their root.

Standard library only, on plain values: the Stop hook asks these questions after every turn,
before it reads anything of the transcript."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from .config import Settings

PAUSE_FILE = "paused"  # in the Lore home; its presence is the switch
IGNORE_FILE = ".lore-ignore"
_CWD = rb'"cwd": ?"((?:[^"\\]|\\.)*)"'  # compiled on use: the Stop hook never needs it
HEAD_BYTES = 64 * 1024  # how much of a transcript's head may be scanned for its cwd


def off_reason_values(enabled: bool, home: str) -> str | None:
    if not enabled:
        return "turned off in the config ([ingestion] enabled = false)"
    if os.path.exists(os.path.join(home, PAUSE_FILE)):
        return "paused by `lore pause`; `lore resume` starts it again"
    return None


def off_reason(settings: Settings) -> str | None:
    """Why the user turned extraction off, or None."""
    return off_reason_values(settings.ingestion_enabled, str(settings.home))


def _matches(path: str, pattern: str) -> bool:
    pattern = os.path.expanduser(pattern).rstrip("/") or "/"
    if any(c in pattern for c in "*?["):
        import fnmatch

        return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(path, pattern + "/*")
    pattern = os.path.realpath(pattern)
    return path == pattern or path.startswith(pattern.rstrip("/") + "/")


def project_ignored_values(cwd: str | None, patterns: tuple[str, ...] | list[str]) -> bool:
    """Whether the project at `cwd` is opted out: it (or a folder above it) matches a
    configured path or glob, or holds a .lore-ignore file."""
    if not cwd:
        return False
    path = os.path.realpath(os.path.expanduser(cwd))
    if any(_matches(path, p) for p in patterns):
        return True
    folder = path
    while True:
        if os.path.exists(os.path.join(folder, IGNORE_FILE)):
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent


def project_ignored(settings: Settings, cwd: str | None) -> bool:
    return project_ignored_values(cwd, settings.ignore_projects)


def transcript_cwd(path: str | os.PathLike[str]) -> str | None:
    """The project folder a transcript was recorded in, from the `cwd` field of its first
    lines, for callers that have no hook payload (the sweep, `lore ingest`). Only that field
    is looked for; no line is parsed."""
    import json
    import re

    head, match = b"", None
    try:
        with open(path, "rb") as handle:
            while match is None and len(head) < HEAD_BYTES:  # the field comes in line 1 or 2
                chunk = handle.read(8192)
                if not chunk:
                    break
                head += chunk
                match = re.search(_CWD, head)
    except OSError:
        return None
    if match is None:
        return None
    try:
        value = json.loads(b'"' + match.group(1) + b'"')
    except ValueError:
        return None
    return value if isinstance(value, str) and value else None


def pause(home: str) -> bool:
    """Turns extraction off until resume(); False when it was paused already."""
    os.makedirs(home, exist_ok=True)
    marker = os.path.join(home, PAUSE_FILE)
    if os.path.exists(marker):
        return False
    import time

    with open(marker, "w", encoding="utf-8") as fh:
        fh.write(time.strftime("%Y-%m-%d %H:%M:%S\n"))
    return True


def resume(home: str) -> bool:
    try:
        os.remove(os.path.join(home, PAUSE_FILE))
    except FileNotFoundError:
        return False
    return True
