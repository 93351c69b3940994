"""The memory service's process: one per Lore home, holding the embedding model, the vector
index and the write path once for every session, hook, command and viewer of that home.

Its life: fork into its own session (stdio to a log), take `run/service.lock` (a second one
started at the same moment finds it held and exits: its caller connects to the winner), load
nothing slow before listening, then warm up in the background. It listens on the private
socket of recall/prompt_socket.py (0600 in a 0700 folder, a token in an owner-only file, the
same-uid check). It drains and exits after LORE_SERVICE_IDLE seconds without a request, on
SIGTERM, on `lore service stop`, or when a client of a newer version asks it anything:
draining stops new requests (they are answered "retry" without running, and the client asks
the next service) and lets those in flight finish, so no acknowledged write is lost."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from .protocol import MAX_REQUEST, NAME, PROTOCOL, idle_secs, plugin_version, version_key

log = logging.getLogger("lore.service")
LOCK_WAIT = 30.0  # seconds a new service waits for a draining one to let go of the lock
ANSWER_TIMEOUT = 10.0  # seconds to hand over an answer once it is ready
MAX_CLIENTS = 64  # requests at once: every session's front, the hooks, the CLI


class Daemon:
    """Requests in flight, draining, and idleness; the ops themselves are ops.Ops."""

    def __init__(self, ops: Any, version: str, idle: float) -> None:
        self.ops, self.version, self.idle = ops, version, idle
        self.cond = threading.Condition()
        self.in_flight = 0
        self.draining = ""  # why, once it drains
        self.last = time.monotonic()
        self.listener: Any = None

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request, on the listener's thread for it."""
        op = request.get("op")
        if op is None and "prompt" in request:
            op = "prompt"  # the per-prompt hook's request, as in-process servers answer it
        if op == "drain":
            self.drain("asked to")
            return {"ok": True}
        if not self._enter():
            return {"retry": True, "busy": True}  # not run: the client asks the next service
        try:
            if op != "prompt":
                theirs = str(request.get("version", ""))
                if version_key(theirs) > version_key(self.version):  # an upgrade: make way
                    self.drain(f"a client of version {theirs} asked")
                    return {"retry": True}
                if request.get("protocol") != PROTOCOL:
                    return {"error": "incompatible protocol", "incompatible": True}
            args = request.get("args")
            project = request.get("project")
            return self.ops.answer(str(op), args if isinstance(args, dict) else {},
                                   project if isinstance(project, str) else None, request)
        finally:
            self._leave()

    def _enter(self) -> bool:
        with self.cond:
            if self.draining:
                return False
            self.in_flight += 1
            self.last = time.monotonic()
            return True

    def _leave(self) -> None:
        with self.cond:
            self.in_flight -= 1
            self.last = time.monotonic()
            self.cond.notify_all()

    def drain(self, why: str) -> None:
        """Stops taking requests (the announcement goes, so clients start a new service) and
        lets run() end once those in flight are done."""
        with self.cond:
            if self.draining:
                return
            self.draining = why
            self.cond.notify_all()
        log.info("draining: %s", why)
        if self.listener is not None:
            self.listener.close()

    def run(self) -> None:
        """Until drained with nothing in flight; idleness starts the drain."""
        with self.cond:
            while not (self.draining and self.in_flight == 0):
                self.cond.wait(0.5)
                if not self.draining and self.in_flight == 0 and \
                        time.monotonic() - self.last > self.idle:
                    self.cond.release()
                    try:
                        self.drain(f"idle for {self.idle:.0f} s")
                    finally:
                        self.cond.acquire()


def detach(log_dir: str) -> None:
    """Fork so the starter's child exits at once (it is reaped there, and this process is
    nobody's to reap but init's), then stdio to a private log file."""
    if os.fork():
        os._exit(0)
    os.makedirs(log_dir, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(log_dir, f"{NAME}.out"),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(null)


def take_lock(home: str, db_path: str) -> int | None:
    """The service lock's descriptor, or None when another service holds it. A service that is
    draining for an upgrade still holds it but no longer announces itself: that one is waited
    for (LOCK_WAIT), so the new version takes over without its caller starting it again."""
    import fcntl

    from ..recall.prompt_socket import run_dir
    from .client import announced

    folder = run_dir(home)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(folder, f"{NAME}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
                 0o600)
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            pass
        if announced(home, db_path) is not None or time.monotonic() > deadline:
            os.close(fd)
            return None  # one runs (or will not let go): ours is not needed
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from ..core.config import load_settings
    from ..core.private import lock_down

    settings = load_settings()
    if "--detach" in argv:
        detach(str(settings.log_dir))
    lock_down(settings.home, settings.db_path)
    from ..safety.logs import setup_logging

    setup_logging(settings.log_dir, NAME)
    lock = take_lock(str(settings.home), str(settings.db_path))
    if lock is None:
        log.info("another memory service runs for %s; this one exits", settings.home)
        return 0
    try:
        return serve(settings)
    finally:
        os.close(lock)  # the lock goes with it, after the announcement has gone


def serve(settings: Any) -> int:
    # One BLAS thread, numpy before any thread starts: as the in-process server (tools.main).
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    import numpy  # noqa: F401

    from ..embedding.embedder import LocalEmbedder
    from ..recall.memory import Memory
    from ..recall.prompt_socket import Listener
    from . import spaced
    from .engine import Service
    from .ops import Ops

    version = plugin_version()
    engine = Service(Memory(settings.db_path, LocalEmbedder(settings.home / "models")))
    spaced.attach(engine, settings)  # with a hub: its spaces are read and routed to
    daemon = Daemon(Ops(engine, version), version, idle_secs())
    listener = Listener(str(settings.home), str(settings.db_path), daemon.handle, name=NAME,
                        info={"protocol": PROTOCOL, "version": version, "kind": NAME},
                        answer_timeout=ANSWER_TIMEOUT, max_request=MAX_REQUEST,
                        max_clients=MAX_CLIENTS)
    daemon.listener = listener
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: threading.Thread(target=daemon.drain,
                                                       args=("signalled",)).start())
    try:
        listener.start()
    except OSError as exc:
        log.warning("the memory service cannot listen: %s", exc)
        listener.close()
        engine.close()
        return 1
    log.info("memory service %s (version %s) serving %s", os.getpid(), version,
             settings.db_path)

    def warm() -> None:
        engine.warm_up()
        engine.warm.set()

    threading.Thread(target=warm, name="lore-warm-up", daemon=True).start()
    try:
        daemon.run()
    finally:
        listener.close()
        listener.wait_answered(ANSWER_TIMEOUT)  # the last answers leave before we do
        daemon.ops.close()
        engine.close()
        log.info("memory service %s stopped (%s)", os.getpid(), daemon.draining or "ended")
    return 0
