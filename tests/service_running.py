"""Helpers for tests that start the memory service (service/) through its clients: find it,
wait for it, and stop it so no service outlives its test (each one idles for 15 minutes)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any


def service_info(home: Path) -> dict[str, Any] | None:
    try:
        return json.loads((home / "run" / "service.json").read_text())
    except (OSError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for a parent that is not us to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(check: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_gone(pid: int, timeout: float = 30.0) -> None:
    wait_until(lambda: not alive(pid), timeout, f"process {pid} to exit")


def stop_service(home: Path, timeout: float = 30.0) -> None:
    """SIGTERM to the home's service (it drains, then exits) and wait for it to go."""
    info = service_info(home)
    if info is None:
        return
    try:
        os.kill(int(info["pid"]), signal.SIGTERM)
    except ProcessLookupError:
        return
    wait_gone(int(info["pid"]), timeout)
