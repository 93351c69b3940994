"""Non-blocking cross-process file locks (Linux, macOS, Windows).

The operating system releases the lock when its holder dies, so a crashed worker never
blocks the next one. Light imports only: hooks use this module."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        if not _try_lock(fd):
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())  # for `lore doctor`: who holds it
        self._fd = fd
        return True

    def is_held_elsewhere(self) -> bool:
        if self._fd is not None:
            return False
        if not self.try_acquire():
            return True
        self.release()
        return False

    def release(self) -> None:
        if self._fd is not None:
            try:
                _unlock(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def temp_sibling(path: Path) -> Path:
    """This process's temporary name beside `path`, for write-then-rename."""
    return path.with_name(f"{path.name}.tmp-{os.getpid()}")


def abandoned_temp(temp: Path) -> bool:
    """Whether `temp` (named by temp_sibling) belongs to a writer that has died."""
    _, marker, pid = temp.name.rpartition(".tmp-")
    return (bool(marker) and pid.isdigit() and int(pid) != os.getpid()
            and not pid_alive(int(pid)))


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs; True when that cannot be told safely."""
    if sys.platform == "win32":  # os.kill(pid, 0) would send CTRL_C_EVENT there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # e.g. someone else's live process
    return True


def transcript_lock(lock_dir: Path, transcript: str) -> FileLock:
    import hashlib  # here: ~2 ms to import, and the Stop hook takes worker slots from this module

    digest = hashlib.sha1(transcript.encode()).hexdigest()[:20]
    return FileLock(lock_dir / f"ingest-{digest}.lock")


def consolidation_lock(lock_dir: Path) -> FileLock:
    return FileLock(lock_dir / "consolidate.lock")
