"""Owner-only files. Lore's home holds a searchable digest of every session the user has had,
so no other local account may read any of it.

Every entry point (hooks, worker, MCP server, CLI, and scripts/lore-launch) calls
`restrict_umask()` before it creates anything, so what Lore makes from then on is 0600 / 0700
whatever the user's umask. `repair()` fixes what older versions created under umask 022: it
looks at a handful of known paths, so it is cheap enough for every SessionStart. `lore doctor`
walks the whole tree (`loose_paths(deep=True)`).

Light imports only: the hooks use this module."""

from __future__ import annotations

import os
import stat
from pathlib import Path

OPEN_BITS = 0o077  # group and other: none of them may be set on anything Lore keeps
# Folders under LORE_HOME whose files hold memory text or traces of it.
DATA_DIRS = ("logs", "locks")
# Files beside the database that SQLite and Lore create with the database's name.
DB_SIBLINGS = ("", "-wal", "-shm", "-journal", "-vectors")


def restrict_umask() -> None:
    os.umask(0o077)


def private_dir(path: Path) -> Path:
    """Creates `path` (and missing parents) owner-only, and tightens it if it already exists."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(path)
    return path


def db_files(db_path: Path) -> list[Path]:
    return [db_path.with_name(db_path.name + suffix) for suffix in DB_SIBLINGS]


def _known_paths(home: Path, db_path: Path | None) -> list[Path]:
    paths = [home]
    for base in [home, *(home / d for d in DATA_DIRS)]:
        try:
            paths += [Path(e.path) for e in os.scandir(base)]
        except OSError:
            continue
    if db_path is not None:
        paths += [db_path.parent, *db_files(db_path)]
    return paths


def _all_paths(home: Path, db_path: Path | None) -> list[Path]:
    paths = [home]
    for root, dirs, files in os.walk(home):  # os.walk does not follow symlinked folders
        paths += [Path(root, n) for n in dirs + files]
    if db_path is not None:
        paths += db_files(db_path)
    return paths


def _is_loose(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    # A symlink's own mode means nothing; what it points to is checked under its own name.
    return not stat.S_ISLNK(st.st_mode) and bool(st.st_mode & OPEN_BITS)


def loose_paths(home: Path, db_path: Path | None = None, deep: bool = False) -> list[Path]:
    """Lore's paths that group or other users can read, write or enter."""
    candidates = _all_paths(home, db_path) if deep else _known_paths(home, db_path)
    seen: set[Path] = set()
    loose = []
    for path in candidates:
        if path not in seen and _is_loose(path):
            loose.append(path)
        seen.add(path)
    return loose


def _tighten(path: Path) -> None:
    st = os.lstat(path)
    if not stat.S_ISLNK(st.st_mode) and st.st_mode & OPEN_BITS:
        # Only group/other bits go: the owner's (an executable in the runtime venv) stay.
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~OPEN_BITS, follow_symlinks=False)


def repair(home: Path, db_path: Path | None = None, deep: bool = False) -> list[Path]:
    """Takes group/other access away from Lore's files; returns what it changed. Never raises:
    a path it cannot change (someone else's file) is left for `lore doctor` to report."""
    fixed = []
    for path in loose_paths(home, db_path, deep=deep):
        try:
            _tighten(path)
        except OSError:
            continue
        fixed.append(path)
    return fixed


def lock_down(home: Path, db_path: Path | None = None) -> None:
    """What every entry point does first: a private umask, and the known paths repaired."""
    restrict_umask()
    try:
        if home.exists():
            repair(home, db_path)
    except OSError:
        pass  # an unreadable home is reported by `lore doctor`; it must not stop a hook


def create_private(path: Path) -> int:
    """Opens a new file for writing that nobody else can read, refusing to follow a planted
    symlink or to reuse an existing file (a temporary name another user could have made)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    return os.open(path, flags, 0o600)
