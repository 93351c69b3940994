"""The client side of the memory service: find it, start it when it is not running, ask it,
and say clearly when it cannot be had so the caller serves itself in-process.

Standard library only (the thin MCP front and the per-prompt hook import it). A request that
the service did not answer because it died is asked again of a new service: reads are safe
to repeat, and a store is too, because storing the same knowledge twice finds the first copy
(store_knowledge) rather than adding a second."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from typing import Any

from ..recall.prompt_socket import KEEP_IDLE, _alive, connect, exchange, exchange_on, run_dir
from .protocol import (
    MAX_ANSWER,
    NAME,
    PROTOCOL,
    enabled,
    plugin_version,
    start_wait,
    version_key,
)

log = logging.getLogger("lore.service")
START_WAIT = 30.0  # seconds a caller that needs the service waits for one to listen
RESPAWN_AFTER = 5.0  # a start that has not announced itself by then is tried again
CALL_TIMEOUT = 120.0  # a store on a cold service loads the model first (seconds, not minutes)
ATTEMPTS = 3  # tries of one request: the service died or drained under it
MAX_FAILURES = 3  # requests in a row that found no service: then this caller stops trying
BACKLOG_PAUSE = 0.005  # s before connecting again when the socket's listen backlog was full
KEEP_REUSE = KEEP_IDLE - 5  # a kept connection idle longer than this is not used again


class Unavailable(Exception):
    """No service to be had: disabled, cannot start, keeps dying, or only a newer one that
    this code cannot speak to. The caller serves itself, unless `may_have_run`: the service
    took the request and did not answer in time, so running it again elsewhere could run it
    twice at once."""

    def __init__(self, message: str, may_have_run: bool = False) -> None:
        super().__init__(message)
        self.may_have_run = may_have_run


def announcement(home: str) -> dict[str, Any] | None:
    """The announcement of the home's running service, whatever database it serves."""
    try:
        with open(os.path.join(run_dir(home), f"{NAME}.json"), encoding="utf-8") as fh:
            info = json.loads(fh.read(4096))
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _alive(pid) or not isinstance(info.get("socket"), str):
        return None
    return info if isinstance(info, dict) else None


def announced(home: str, db_path: str) -> dict[str, Any] | None:
    """The running service's announcement, when it serves this database; None otherwise."""
    info = announcement(home)
    return info if info is not None and info.get("db") == os.path.realpath(db_path) else None


def start(home: str) -> subprocess.Popen[bytes] | None:
    """Starts a service: it forks itself into its own session (so it is never a child left
    for us to reap), stdio closed (it logs to its files), and exits at once when another one
    holds the lock. None when it cannot even be started."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "lore_plugin.service", "--detach"],
            cwd=home if os.path.isdir(home) else None,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
    except OSError as exc:
        log.warning("could not start the memory service: %s", exc)
        return None


def forget(home: str, info: dict[str, Any]) -> None:
    """Removes the announcement of a service that no longer listens, if it is still that
    one's (a new service may have announced itself meanwhile)."""
    path = os.path.join(run_dir(home), f"{NAME}.json")
    try:
        with open(path, encoding="utf-8") as fh:
            if json.loads(fh.read(4096)).get("token") == info.get("token"):
                os.unlink(path)
    except (OSError, ValueError, AttributeError):
        pass


class ServiceClient:
    """Requests to the one service of a Lore home, started on demand."""

    def __init__(self, home: str, db_path: str, project: str | None = None,
                 wait: float | None = None, timeout: float = CALL_TIMEOUT) -> None:
        self.home, self.db_path, self.project = home, db_path, project
        self.start_wait = start_wait(START_WAIT) if wait is None else wait
        self.timeout = timeout
        self.version = plugin_version()
        self.failures = 0
        self._started: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        import threading

        # One connection kept open between requests (the service waits on it for the next):
        # no connect and no new thread in the service a request. Used by one request at a
        # time; another at the same moment opens its own.
        self._keeping = threading.Lock()
        self._kept: tuple[Any, Any, float] | None = None  # socket, its service's token, when

    @property
    def usable(self) -> bool:
        return self.failures < MAX_FAILURES and enabled()

    def request(self, op: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """The service's answer to one op; Unavailable when none can be had."""
        if not self.usable:
            raise Unavailable("the memory service is off or failed repeatedly")
        payload = {"protocol": PROTOCOL, "version": self.version, "op": op, "args": args or {},
                   "project": self.project}
        attempts, deadline = 0, time.monotonic() + self.start_wait
        while attempts < ATTEMPTS and time.monotonic() < deadline:
            info = self.ready()
            try:
                answer = self._exchange(info, payload, time.monotonic() + self.timeout)
            except TimeoutError as exc:  # it is alive but stuck: asking again would pile up
                self.failures += 1
                raise Unavailable(f"the memory service took over {self.timeout:.0f} s",
                                  may_have_run=True) from exc
            except BlockingIOError:  # its listen backlog is full (many sessions at once): the
                time.sleep(BACKLOG_PAUSE)  # request never reached it, so this is no attempt
                continue
            except (ConnectionRefusedError, FileNotFoundError):
                forget(self.home, info)  # nothing listens: killed before it could clean up;
                continue  # the request never reached it, so this is no attempt
            except (OSError, EOFError) as exc:  # died under us: a new one is asked
                log.warning("memory service %s lost during %s: %s", info.get("pid"), op, exc)
                attempts += 1
                continue
            if answer is None or answer.get("retry"):  # garbled, or draining for an upgrade
                attempts += 1
                continue
            if answer.get("incompatible"):
                self.failures = MAX_FAILURES
                raise Unavailable("the memory service speaks another protocol")
            self.failures = 0
            return answer
        self.failures += 1
        raise Unavailable("the memory service stopped answering")

    def _exchange(self, info: dict[str, Any], payload: dict[str, Any], deadline: float
                  ) -> dict[str, Any] | None:
        if not self._keeping.acquire(blocking=False):
            return exchange(info, payload, deadline, MAX_ANSWER)
        try:
            kept, self._kept = self._kept, None
            if kept is not None and (kept[1] != info.get("token")
                                     or time.monotonic() - kept[2] > KEEP_REUSE):
                kept[0].close()  # another service now, or the service may have let it go
                kept = None
            sock = connect(info, deadline) if kept is None else kept[0]
            try:
                answer = exchange_on(sock, info, {**payload, "keep": True}, deadline,
                                     MAX_ANSWER)
            except TimeoutError:  # stuck: the caller decides, as for a fresh connection
                sock.close()
                raise
            except (OSError, EOFError):
                sock.close()
                if kept is None:
                    raise
                # The kept connection was closed under us (the service restarted or let it
                # go): asked again on a new one, as request() would (a store repeated finds
                # its first copy rather than adding one).
                sock = connect(info, deadline)
                try:
                    answer = exchange_on(sock, info, {**payload, "keep": True}, deadline,
                                         MAX_ANSWER)
                except BaseException:
                    sock.close()
                    raise
            self._kept = (sock, info.get("token"), time.monotonic())
            return answer
        finally:
            self._keeping.release()

    def ready(self) -> dict[str, Any]:
        """A running service this code may talk to, started when there is none."""
        deadline = time.monotonic() + self.start_wait
        while True:
            info = announcement(self.home)
            if info is not None and info.get("db") != os.path.realpath(self.db_path):
                # One service a home, and it serves another database (LORE_DB_PATH differs):
                # a start would only find its lock held, so this caller serves itself now
                # rather than after the whole wait.
                raise Unavailable(f"the memory service of this Lore home serves another "
                                  f"database ({info.get('db')})")
            if info is not None:
                if info.get("protocol") == PROTOCOL or self._older(info):
                    return info  # an older one drains when it sees our version (daemon.py)
                self.failures = MAX_FAILURES  # a newer protocol: this session serves itself
                raise Unavailable(f"a newer memory service ({info.get('version')}) runs")
            self.kick()
            if time.monotonic() > deadline:
                self.failures += 1
                raise Unavailable(f"no memory service within {self.start_wait:.0f} s")
            time.sleep(0.02)

    def kick(self) -> None:
        """Starts a service unless one this client started is still coming up."""
        if self._started is not None:
            self._started.poll()  # the launcher exits as soon as the service has forked
            if time.monotonic() - self._started_at < RESPAWN_AFTER:
                return
        self._started, self._started_at = start(self.home), time.monotonic()

    def _older(self, info: dict[str, Any]) -> bool:
        return version_key(str(info.get("version", ""))) < version_key(self.version)

    def close(self) -> None:
        with self._keeping:
            kept, self._kept = self._kept, None
        if kept is not None:
            kept[0].close()
        started, self._started = self._started, None
        if started is not None:
            started.poll()  # reaped if it has exited; a live one runs on in its own session
