"""A private local socket on which a warm process answers: the memory service (service/,
announced as `run/service.json`) or an in-process MCP server (`run/<pid>.json`), for the
per-prompt hook, the MCP fronts, the CLI and the viewer.

The answering process has the embedding model and the vector index warm; a hook process would
need several hundred milliseconds to load them. So it listens on its own Unix socket and
announces it in `LORE_HOME/run/<name>.json` (0600, in a 0700 folder) with a random token. A
client must be able to read that file (the owner) and, on Linux, must run as the same user
(SO_PEERCRED); anything else is refused. One JSON request line in, one JSON answer line out.

Standard library only (os, socket, json, secrets): the client side runs inside the hook."""

from __future__ import annotations

import json
import os
import socket

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable
    from typing import Any

RUN_DIR = "run"
MAX_REQUEST = 256 * 1024  # the hook sends at most 4,000 prompt characters and the seen ids
MAX_ANSWER = 256 * 1024
REQUEST_DEADLINE = 1.0  # seconds for a whole request, its first byte to its answer
MAX_CLIENTS = 16  # requests answered at once; a client beyond that is closed at once
KEEP_IDLE = 20.0  # seconds a kept connection waits for its client's next request
SEND_GRACE = 0.1  # seconds to hand over an answer finished just after the deadline
_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS


def run_dir(home: str) -> str:
    return os.path.join(home, RUN_DIR)


def _private_dir(path: str) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)


def _peer_is_owner(conn: socket.socket) -> bool:
    """SO_PEERCRED where the platform has it (Linux); elsewhere the token and the 0600 file
    are the check."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    import struct

    creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


class Listener:
    """The server side: a daemon thread accepting connections, and one short-lived thread per
    request answering it with `handle` (which must be safe to call from several at once)."""

    def __init__(self, home: str, db_path: str,
                 handle: Callable[[dict[str, Any]], dict[str, Any]],
                 deadline: float = REQUEST_DEADLINE, name: str | None = None,
                 info: dict[str, Any] | None = None, answer_timeout: float | None = None,
                 max_request: int = MAX_REQUEST, max_clients: int = MAX_CLIENTS) -> None:
        """`deadline` bounds reading a request, and with no `answer_timeout` the whole
        exchange; a service whose work may take longer (a store, a cold model) gives
        `answer_timeout` for sending once the answer is ready. `info` is announced with the
        socket (the service's versions)."""
        import secrets

        self.home, self.db_path, self.handle, self.deadline = home, db_path, handle, deadline
        self.answer_timeout, self.max_request, self.max_clients = (answer_timeout, max_request,
                                                                   max_clients)
        self.extra_info = info or {}
        self.token = secrets.token_hex(16)
        self.pid = os.getpid()
        self.name = name or str(self.pid)
        self.info_path = os.path.join(run_dir(home), f"{self.name}.json")
        self.socket_path = ""
        self._temp_dir: str | None = None
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._answering = 0  # connections taken and not yet answered (wait_answered)
        import threading  # here, not at the top: the hook imports this module for ask() alone

        self._count = threading.Lock()

    def start(self) -> None:
        if not hasattr(socket, "AF_UNIX"):  # Windows: the hook searches by keywords alone
            raise OSError("this platform has no Unix sockets")
        folder = run_dir(self.home)
        _private_dir(folder)
        path = os.path.join(folder, f"{self.name}.sock")
        if len(os.fsencode(path)) > _SOCKET_PATH_MAX:  # a deep LORE_HOME: a private temp folder
            import tempfile

            self._temp_dir = tempfile.mkdtemp(prefix="lore-")  # 0700
            path = os.path.join(self._temp_dir, "s")
        if os.path.lexists(path):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is created 0600, never briefly open to others
        try:
            sock.bind(path)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(8)
        self._sock, self.socket_path = sock, path
        info = json.dumps({**self.extra_info, "pid": self.pid, "socket": path,
                           "token": self.token, "db": os.path.realpath(self.db_path)})
        tmp = f"{self.info_path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(info)
        os.replace(tmp, self.info_path)  # a reader sees the whole file or none
        import threading  # here: the hook imports this module for ask() alone

        self._thread = threading.Thread(target=self._serve, name="lore-prompt-socket",
                                        daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        """Accepts connections and answers each on its own thread, so a client that drips its
        request, or never reads its answer, holds up no one else."""
        import threading

        sock = self._sock
        slots = threading.BoundedSemaphore(self.max_clients)
        while sock is not None and self._sock is not None:
            try:
                conn, _ = sock.accept()
            except OSError:
                return  # closed
            if not slots.acquire(blocking=False):
                conn.close()  # too many at once: that hook searches by keywords itself
                continue
            with self._count:
                self._answering += 1
            try:
                threading.Thread(target=self._answer, args=(conn, slots),
                                 name="lore-prompt-request", daemon=True).start()
            except RuntimeError:  # no thread to be had: as if too many
                conn.close()
                with self._count:
                    self._answering -= 1
                slots.release()

    def _answer(self, conn: socket.socket, slots: threading.BoundedSemaphore) -> None:
        """One request within REQUEST_DEADLINE in all: a per-read timeout alone would let a
        client that sends a byte a second keep its connection for ever."""
        import hmac
        import logging
        import time

        deadline = time.monotonic() + self.deadline
        counted = True  # in _answering: taken and not yet answered
        try:
            with conn:
                if not _peer_is_owner(conn):
                    return
                while True:
                    request = json.loads(_read_line(conn, self.max_request, deadline)
                                         or b"null")
                    if not isinstance(request, dict) or not hmac.compare_digest(
                            str(request.get("token", "")), self.token):
                        return
                    answer = self.handle(request)
                    conn.settimeout(self.answer_timeout or max(deadline - time.monotonic(),
                                                               SEND_GRACE))
                    conn.sendall(json.dumps(answer).encode() + b"\n")
                    # A client that keeps its connection (the service's, service/client.py)
                    # saves a connect and a thread a request; waiting for its next one, the
                    # connection is not "answering", so closing does not wait for it.
                    if not request.get("keep") or self._sock is None:
                        return
                    with self._count:
                        self._answering -= 1
                    counted = False
                    if not _readable(conn, KEEP_IDLE) or self._sock is None:
                        return
                    with self._count:
                        self._answering += 1
                    counted = True
                    deadline = time.monotonic() + self.deadline
        except TimeoutError:
            logging.getLogger("lore.server").info(
                "prompt socket: a client took more than %.1f s; dropped", self.deadline)
        except Exception:  # one bad client must not stop the listener
            logging.getLogger("lore.server").warning("prompt socket request failed",
                                                     exc_info=True)
        finally:
            if counted:
                with self._count:
                    self._answering -= 1
            slots.release()

    def wait_answered(self, timeout: float) -> None:
        """After close(): until every connection taken has had its answer sent (a process
        about to exit lets its last answers leave first), or `timeout` seconds."""
        import time

        deadline = time.monotonic() + timeout
        while self._answering > 0 and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for path in (self.info_path, self.socket_path):
            try:
                if path:
                    os.unlink(path)
            except OSError:
                pass
        if self._temp_dir:
            try:
                os.rmdir(self._temp_dir)
            except OSError:
                pass


def _readable(conn: socket.socket, timeout: float) -> bool:
    """Whether the client sent more (or closed) within `timeout` seconds."""
    import select

    try:
        return bool(select.select([conn], [], [], timeout)[0])
    except (OSError, ValueError):
        return False


def _read_line(conn: socket.socket, limit: int, deadline: float) -> bytes:
    """The first line the client sends, read until `deadline` (time.monotonic) at the latest;
    TimeoutError past it."""
    import time

    chunks: list[bytes] = []
    size = 0
    while size < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request deadline passed")
        conn.settimeout(left)
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk:
            break
    return b"".join(chunks).split(b"\n", 1)[0]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale(info_path: str, socket_path: object) -> None:
    """A crashed server's announcement, its socket and the private temp folder it made."""
    for stale in (info_path, socket_path):
        try:
            if isinstance(stale, str):
                os.unlink(stale)
        except OSError:
            pass
    if isinstance(socket_path, str):
        folder = os.path.dirname(socket_path)
        if os.path.basename(folder).startswith("lore-"):
            try:
                os.rmdir(folder)
            except OSError:
                pass


def _servers(home: str, db_path: str) -> list[dict[str, Any]]:
    """Announced servers of this database, newest first; files of dead servers are removed."""
    folder = run_dir(home)
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json")]
    except OSError:
        return []
    db = os.path.realpath(db_path)
    found = []
    for name in names:
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8") as fh:
                info = json.loads(fh.read(4096))
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _alive(pid):
            _remove_stale(path, info.get("socket"))
            continue
        if info.get("db") == db and isinstance(info.get("socket"), str):
            try:
                info["_mtime"] = os.stat(path).st_mtime
            except OSError:
                continue
            found.append(info)
    found.sort(key=lambda i: i["_mtime"], reverse=True)
    return found


def exchange(info: dict[str, Any], request: dict[str, Any], deadline: float,
             limit: int = MAX_ANSWER) -> dict[str, Any] | None:
    """One request to the announced process `info`, its answer by `deadline`
    (time.monotonic); None for a garbled answer. OSError (refused, reset, timed out) and
    EOFError (closed with no answer: it died or refused the token) reach the caller."""
    with connect(info, deadline) as sock:
        return exchange_on(sock, info, request, deadline, limit)


def connect(info: dict[str, Any], deadline: float) -> socket.socket:
    import time

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        sock.connect(info["socket"])
    except BaseException:
        sock.close()
        raise
    return sock


def exchange_on(sock: socket.socket, info: dict[str, Any], request: dict[str, Any],
                deadline: float, limit: int = MAX_ANSWER) -> dict[str, Any] | None:
    """exchange() over a connection already open (one the client keeps: `keep` in the
    request asks the listener to wait for the next one on it)."""
    import time

    sock.settimeout(max(deadline - time.monotonic(), 0.001))
    sock.sendall(json.dumps({**request, "token": info.get("token", "")}).encode() + b"\n")
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n"):
            break
    if not chunks:
        raise EOFError("closed without an answer")
    try:
        answer = json.loads(b"".join(chunks))
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def ask(home: str, db_path: str, request: dict[str, Any], timeout: float
        ) -> dict[str, Any] | None:
    """The first running server's answer within `timeout` seconds in all, or None."""
    import time

    if not hasattr(socket, "AF_UNIX"):
        return None
    deadline = time.monotonic() + timeout
    for info in _servers(home, db_path):
        if deadline - time.monotonic() <= 0:
            return None
        try:
            answer = exchange(info, request, deadline)
        except (OSError, EOFError):  # refused, timed out, or gone: try the next one
            continue
        if answer is not None:
            return answer
    return None
