"""The worker queue: at most `max_workers` detached workers alive at once, machine-wide
(per Lore home), however many hooks fire together.

A hook writes its job to <home>/queue, then tries to take a free worker slot (one lock file
each). With a slot, it starts a worker that inherits the locked file, so the slot is never
free between the hook's check and the worker's start; without one, it leaves the job to the
workers already running. A worker runs jobs until the queue is empty, lets its slot go, and
looks once more: a job queued while every slot was taken is always seen by the worker whose
release made room. No worker waits for work, so none outlives it.

Standard library only: the Stop hook uses this after every turn."""

from __future__ import annotations

import json
import os
import re

from ..core.faults import crash_point  # test-only, free when unset
from ..core.locks import _try_lock, pid_alive

QUEUE = "queue"
CLAIMED = ".claimed-"  # a job file taken by a worker: <name>.claimed-<pid>
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def queue_dir(home: str) -> str:
    return os.path.join(home, QUEUE)


def job_name(args: list[str]) -> str:
    """One file per job and transcript: the same job queued twice is queued once. The
    transcript's file name (a session id) is kept whole at the end of the name."""
    return (args[0] + "-" + _UNSAFE.sub("_", args[1] if len(args) > 1 else ""))[-150:] + ".job"


def enqueue(home: str, args: list[str]) -> None:
    folder = queue_dir(home)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, job_name(args))
    if os.path.exists(path):
        # Queued already and not yet taken: when a worker takes it, it reads the transcript
        # as it is then. (Replacing the file would also cost ext4 a flush of its data.)
        return
    temp = f"{path}.tmp-{os.getpid()}"
    with open(temp, "w", encoding="utf-8") as fh:
        json.dump(args, fh)
    os.replace(temp, path)  # whole or absent: a worker never reads half a job


def try_slot(lock_dir: str, slots: int) -> int | None:
    """An open descriptor holding one free worker slot's lock, or None when all are taken."""
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    for index in range(max(slots, 1)):
        fd = os.open(os.path.join(lock_dir, f"worker-slot-{index}.lock"),
                     os.O_RDWR | os.O_CREAT, 0o600)
        if _try_lock(fd):
            return fd
        os.close(fd)
    return None


def waiting(home: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(queue_dir(home)) if n.endswith(".job"))
    except FileNotFoundError:
        return []


def take(home: str) -> tuple[str, list[str]] | None:
    """Claims the oldest waiting job: (its claimed file, its arguments), or None."""
    folder = queue_dir(home)
    names = waiting(home)
    names.sort(key=lambda n: _mtime(os.path.join(folder, n)))
    for name in names:
        claimed = os.path.join(folder, f"{name}{CLAIMED}{os.getpid()}")
        try:
            os.rename(os.path.join(folder, name), claimed)  # atomic: one worker wins
        except FileNotFoundError:
            continue  # another worker took it
        try:
            with open(claimed, encoding="utf-8") as fh:
                args = json.load(fh)
        except (OSError, ValueError):
            args = None
        if isinstance(args, list) and args and all(isinstance(a, str) for a in args):
            crash_point("after-claim")
            return claimed, args
        finish(claimed)  # not a job: drop it rather than fail on it forever
    return None


def finish(claimed: str) -> None:
    try:
        os.remove(claimed)
    except FileNotFoundError:
        pass


def requeue_abandoned(home: str) -> int:
    """Puts back the jobs claimed by workers that died before finishing them (the
    watermarks make running a job twice harmless)."""
    folder = queue_dir(home)
    count = 0
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    for name in names:
        job, marker, pid = name.rpartition(CLAIMED)
        if marker and pid.isdigit() and not pid_alive(int(pid)):
            try:
                os.rename(os.path.join(folder, name), os.path.join(folder, job))
                count += 1
            except OSError:
                continue
    return count


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
