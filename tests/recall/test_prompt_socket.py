"""The per-prompt socket against slow clients (issue 25, finding 12): a same-user process that
drips its request one byte at a time is dropped when its request's deadline passes, and
while it drips, other clients are answered at once. Real Unix sockets, a real Listener, real
threads; every wait is bounded."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from lore_plugin.recall import prompt_socket
from lore_plugin.recall.prompt_socket import Listener, ask

DRIP_EVERY = 0.1  # seconds between two bytes: well inside any per-read timeout
DRIP_FOR = 6.0  # a dripper gives up after this, so a test never hangs


@pytest.fixture()
def listener(tmp_path: Path):
    home = tmp_path / "lore"
    served = Listener(str(home), str(home / "memory.db"),
                      lambda request: {"context": str(request.get("prompt")).upper(), "ids": []})
    served.start()
    yield served
    served.close()


def ask_it(listener: Listener, prompt: str, timeout: float) -> dict | None:
    return ask(listener.home, listener.db_path, {"prompt": prompt}, timeout)


class Dripper(threading.Thread):
    """Connects and sends a valid-looking request one byte at a time, never its newline;
    records when the server closed the connection on it."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.sendall(b"{")  # the server has its first byte before anyone else connects
        self.connected = time.monotonic()
        self.dropped_after: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        self.sock.settimeout(DRIP_EVERY)
        try:
            while not self.stop.is_set() and time.monotonic() - self.connected < DRIP_FOR:
                try:
                    if self.sock.recv(1) == b"":
                        break  # the server closed it
                except TimeoutError:  # nothing from the server: one more byte
                    self.sock.sendall(b"x")
            else:
                return  # stopped, or gave up: it was never dropped
        except OSError:  # EPIPE or ECONNRESET: closed while it wrote
            pass
        finally:
            self.sock.close()
        self.dropped_after = time.monotonic() - self.connected


def test_a_client_dripping_its_request_is_dropped_when_the_deadline_passes(listener):
    dripper = Dripper(listener.socket_path)
    dripper.start()
    dripper.join(DRIP_FOR + 2)
    assert dripper.dropped_after is not None, "the server never dropped the dripping client"
    assert dripper.dropped_after < prompt_socket.REQUEST_DEADLINE + 1.0


def test_a_dripping_client_never_holds_up_the_next_prompt(listener):
    dripper = Dripper(listener.socket_path)
    dripper.start()
    try:
        started = time.monotonic()
        answer = ask_it(listener, "deploy window", 0.5)  # the hook's own wait is 0.25 s
        assert answer == {"context": "DEPLOY WINDOW", "ids": []}
        assert time.monotonic() - started < 0.5
        assert dripper.is_alive() and dripper.dropped_after is None  # still dripping meanwhile
    finally:
        dripper.stop.set()
        dripper.join(5)


def test_several_slow_and_silent_clients_never_hold_up_the_prompts(listener):
    drippers = [Dripper(listener.socket_path) for _ in range(3)]
    silent = []
    for _ in range(3):  # connect and say nothing at all
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(listener.socket_path)
        silent.append(sock)
    for dripper in drippers:
        dripper.start()
    try:
        for prompt in ("one", "two", "three"):
            started = time.monotonic()
            assert ask_it(listener, prompt, 0.5) == {"context": prompt.upper(), "ids": []}
            assert time.monotonic() - started < 0.5
    finally:
        for dripper in drippers:
            dripper.stop.set()
            dripper.join(5)
        for sock in silent:
            sock.close()


def test_an_answer_the_client_never_reads_does_not_hold_the_listener(listener):
    """A client that sends its request and then stops reading: the answer waits in the
    socket's buffer, and the next prompt is answered all the same."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
        idle.connect(listener.socket_path)
        token = json.loads(Path(listener.info_path).read_text())["token"]
        idle.sendall(json.dumps({"prompt": "y" * 250_000, "token": token}).encode() + b"\n")
        assert ask_it(listener, "after", 0.5) == {"context": "AFTER", "ids": []}


def test_clients_beyond_the_limit_are_turned_away_at_once_and_served_again_after(listener):
    """Threads are bounded: past MAX_CLIENTS a connection is closed at once (the hook then
    searches by keywords), and a slot comes back when a silent client's deadline passes."""
    silent = []
    for _ in range(prompt_socket.MAX_CLIENTS):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(listener.socket_path)
        silent.append(sock)
    try:
        started = time.monotonic()
        assert ask_it(listener, "busy", 2.0) is None
        assert time.monotonic() - started < 0.5  # turned away, not left waiting
        deadline = time.monotonic() + prompt_socket.REQUEST_DEADLINE + 2.0
        answer = None
        while answer is None and time.monotonic() < deadline:
            answer = ask_it(listener, "later", 0.5)
            if answer is None:
                time.sleep(0.05)  # still turned away: the silent ones hold every slot
        assert answer == {"context": "LATER", "ids": []}
    finally:
        for sock in silent:
            sock.close()
