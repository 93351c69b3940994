"""What the memory service and its clients agree on: where it is announced, how a request
looks, and which versions may talk. Standard library only: the per-prompt hook and the thin
MCP front import this, and neither may pay for more.

A request is one JSON line (at most MAX_REQUEST bytes) on the service's private socket:
    {"token": ..., "protocol": PROTOCOL, "version": plugin version, "op": ..., "args": {...},
     "project": the caller's project key or null}
and the answer one JSON line: the op's data, or {"error": text}, or {"retry": true} when the
service is draining and did not run the request (the caller starts a new service and asks
it). A request without "op" but with "prompt" is the per-prompt hook's, as the in-process
servers have always answered it."""

from __future__ import annotations

import os

from .. import __version__

PROTOCOL = 1  # bumped when a request or an answer changes shape
NAME = "service"  # run/service.json, run/service.sock, run/service.lock, logs/service.log
MAX_REQUEST = 1 << 20  # a store carries at most 20,000 characters of content (JSON-escaped)
MAX_ANSWER = 1 << 20  # tool answers are fitted to 8,000 characters of text and of JSON
IDLE_SECS = 15 * 60.0  # the service exits after this long without a request
OPS = ("tool", "prompt", "recall", "status", "drain")


def plugin_version() -> str:
    """This code's version; LORE_SERVICE_VERSION overrides it so that tests (and a user
    checking an upgrade) can run a service that calls itself older or newer."""
    return os.environ.get("LORE_SERVICE_VERSION") or __version__


def version_key(version: str) -> tuple[int, ...]:
    """"0.1.10" → (0, 1, 10); a part that is not a number counts as 0."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("+")[0].split("."))


def idle_secs() -> float:
    """LORE_SERVICE_IDLE (seconds) or IDLE_SECS; nonsense falls back to the default."""
    try:
        value = float(os.environ.get("LORE_SERVICE_IDLE", ""))
    except ValueError:
        return IDLE_SECS
    return value if value > 0 else IDLE_SECS


def start_wait(default: float) -> float:
    """LORE_SERVICE_START_WAIT (seconds) or `default`: how long a caller waits for a service
    to listen before it serves itself."""
    try:
        value = float(os.environ.get("LORE_SERVICE_START_WAIT", ""))
    except ValueError:
        return default
    return value if value > 0 else default


def enabled() -> bool:
    """Whether a service may be used at all: LORE_SERVICE=off keeps every process in-process,
    and a platform without Unix sockets has no private channel to one."""
    import socket

    return (os.environ.get("LORE_SERVICE", "").strip().lower() not in {"off", "0", "no", "false"}
            and hasattr(socket, "AF_UNIX"))
