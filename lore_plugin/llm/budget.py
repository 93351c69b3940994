"""The request and token budgets every LLM call passes: `BudgetGuard` caps requests per hour
across every process, and `GuardedLLM` puts any LLM behind it and behind the token ledger
(usage.py): refused once the day's tokens are spent, every call's tokens recorded."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import BudgetExceeded, LoreError
from .usage import PURPOSES, Ledger

log = logging.getLogger(__name__)
HOUR = 3600.0
Tool = dict[str, Any]


class LLM(Protocol):  # llm.LLM, restated: client.py builds on this module, not the other way
    def call_tool(
        self, *, system: str, prompt: str, tool: Tool, max_tokens: int = 4096
    ) -> dict[str, Any]: ...


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """An OS-level exclusive lock, released even if the holder is killed."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if sys.platform == "win32":
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # gives up after ~10 s: try again
                    break
                except OSError:
                    continue
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock on both platforms


class BudgetGuard:
    """At most `max_per_hour` LLM calls in any sliding hour, shared by every Lore process.

    State is a JSON list of call timestamps. The lock lives in a separate file because the
    data file is replaced atomically (a crash mid-write never leaves half a file).
    """

    def __init__(
        self, path: Path, max_per_hour: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.path, self.max_per_hour, self.clock = Path(path), max_per_hour, clock
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    def _recent(self, now: float) -> list[float]:
        try:
            stamps = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []  # missing or corrupt: start afresh rather than block extraction forever
        if not isinstance(stamps, list):
            return []
        # Stamps far in the future mean the clock went back; they must not block for days.
        return sorted(
            float(t) for t in stamps
            if isinstance(t, int | float) and now - HOUR < t <= now + HOUR
        )  # fmt: skip

    def used(self) -> int:
        """Calls in the last hour (a lock-free read, for status)."""
        return len(self._recent(self.clock()))

    def acquire(self) -> None:
        """Count one call, or raise BudgetExceeded when the hour's cap is reached."""
        with _exclusive(self._lock_path):
            now = self.clock()
            stamps = self._recent(now)
            if len(stamps) >= self.max_per_hour:
                wait = stamps[len(stamps) - self.max_per_hour] + HOUR - now
                raise BudgetExceeded(
                    f"LLM budget reached: {self.max_per_hour} requests in the last hour; "
                    f"next one allowed in {max(wait, 0) / 60:.0f} min"
                )
            stamps.append(now)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(stamps))
            os.replace(tmp, self.path)


class GuardedLLM:
    """Any LLM behind a BudgetGuard: each call_tool spends one request of the budget. With a
    ledger, it is also refused once the day's tokens are spent, and every call's tokens are
    recorded with its purpose (told by the tool) and `project` (set by the caller)."""

    def __init__(self, inner: LLM, guard: BudgetGuard, ledger: Ledger | None = None,
                 model: str = "") -> None:
        self.inner, self.guard, self.ledger, self.model = inner, guard, ledger, model
        self.project: str | None = None

    def call_tool(
        self, *, system: str, prompt: str, tool: Tool, max_tokens: int = 4096
    ) -> dict[str, Any]:
        if self.ledger is not None:
            self.ledger.check()  # before the hourly guard, which would count a refused call
        self.guard.acquire()
        if self.ledger is None:
            return self.inner.call_tool(system=system, prompt=prompt, tool=tool,
                                        max_tokens=max_tokens)
        if hasattr(self.inner, "last_usage"):
            self.inner.last_usage = None
        try:
            return self.inner.call_tool(system=system, prompt=prompt, tool=tool,
                                        max_tokens=max_tokens)
        finally:
            usage = getattr(self.inner, "last_usage", None)
            if usage is not None:
                purpose = PURPOSES.get(tool["name"]) or str(tool["name"])
                try:
                    self.ledger.record(purpose, self.project, self.model, usage)
                except LoreError as exc:  # a busy or broken database must not lose the answer
                    log.warning("could not record %s tokens: %s", purpose, exc)
