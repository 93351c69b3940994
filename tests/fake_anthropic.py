"""A fake Anthropic Messages API on 127.0.0.1, for the anthropic SDK and the real `claude` CLI.

Tests point ANTHROPIC_BASE_URL (or the SDK's base_url) at `FakeAnthropic().url`. Every
/v1/messages request is recorded and answered by a pluggable responder: plain JSON for
non-streaming calls, and the SSE event sequence of the streaming spec when the body says
"stream": true (which is how Claude Code talks to the API).

    with FakeAnthropic(ScriptedResponder([error_reply(500), tool_reply("t", {"a": 1})])) as api:
        client = anthropic.Anthropic(api_key="x", base_url=api.url)
"""

from __future__ import annotations

import itertools
import json
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_ids = itertools.count(1)


@dataclass(frozen=True)
class Reply:
    """One answer: content blocks (text / tool_use), or an HTTP error; optionally late."""

    blocks: tuple[dict[str, Any], ...] = ()
    status: int = 200
    message: str = ""  # error message for status != 200
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    headers: tuple[tuple[str, str], ...] = ()
    stop_reason: str | None = None  # None: "tool_use" if a tool is called, else "end_turn"


def text_reply(text: str, *, delay: float = 0.0) -> Reply:
    return Reply(blocks=({"type": "text", "text": text},), delay=delay)


def tool_reply(name: str, input: dict[str, Any], *, text: str = "", delay: float = 0.0) -> Reply:
    """A tool_use answer, optionally preceded by a text block as real models often do."""
    tool = {"type": "tool_use", "id": f"toolu_fake{next(_ids):06d}", "name": name, "input": input}
    blocks = ({"type": "text", "text": text}, tool) if text else (tool,)
    return Reply(blocks=blocks, delay=delay)


def error_reply(status: int, message: str = "", *, retry_after: float | None = None) -> Reply:
    headers = (("retry-after", str(retry_after)),) if retry_after is not None else ()
    return Reply(status=status, message=message or f"fake error {status}", headers=headers)


def delayed(reply: Reply, seconds: float) -> Reply:
    return replace(reply, delay=seconds)


Responder = Callable[[dict[str, Any]], Reply]


class ScriptedResponder:
    """Answers with queued replies in order, then with `default` forever. Thread-safe."""

    def __init__(self, replies: Iterable[Reply] = (), default: Reply | None = None) -> None:
        self._queue: deque[Reply] = deque(replies)
        self._default = default or text_reply("ok")
        self._lock = threading.Lock()

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            return self._queue.popleft() if self._queue else self._default


def structured_output_responder(data: dict[str, Any], otherwise: Reply | None = None) -> Responder:
    """For the real `claude -p --json-schema`: answer its StructuredOutput tool with `data`."""

    def respond(body: dict[str, Any]) -> Reply:
        if any(t.get("name") == "StructuredOutput" for t in body.get("tools") or []):
            return tool_reply("StructuredOutput", data)
        return otherwise or text_reply("ok")

    return respond


class Request(dict):  # type: ignore[type-arg]
    """A recorded request: the parsed JSON body, plus `.path`, `.method` and `.headers`."""

    def __init__(self, body: dict[str, Any], path: str, method: str, headers: dict[str, str]):
        super().__init__(body)
        self.path, self.method, self.headers = path, method, headers


def _usage(body: dict[str, Any], output_tokens: int) -> dict[str, int]:
    # Rough token counts: clients only display them, but some (Claude Code) require the keys.
    return {
        "input_tokens": max(1, len(json.dumps(body.get("messages", []))) // 4),
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _message(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    has_tool = any(b["type"] == "tool_use" for b in reply.blocks)
    return {
        "id": f"msg_fake{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": [dict(b) for b in reply.blocks],
        "stop_reason": reply.stop_reason or ("tool_use" if has_tool else "end_turn"),
        "stop_sequence": None,
        "usage": _usage(body, max(1, len(json.dumps(reply.blocks)) // 4)),
    }


def sse_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The streaming spec's event sequence for a finished message."""
    head = dict(message, content=[], stop_reason=None, stop_sequence=None)
    head["usage"] = dict(message["usage"], output_tokens=1)
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": head})]
    events.append(("ping", {}))
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            start = dict(block, input={})
            raw = json.dumps(block["input"])
            # Split the JSON so clients must really accumulate partial_json deltas.
            cut = len(raw) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": p} for p in (raw[:cut], raw[cut:])
            ]
        else:
            start = dict(block, text="")
            deltas = [{"type": "text_delta", "text": block["text"]}]
        events.append(("content_block_start", {"index": index, "content_block": start}))
        events += [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"index": index}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": message["usage"]["output_tokens"]}
    events.append(("message_delta", {"delta": delta, "usage": usage}))
    events.append(("message_stop", {}))
    return [(name, {"type": name, **data}) for name, data in events]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while (size := int(self.rfile.readline().strip() or b"0", 16)) > 0:
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _send_json(
        self, status: int, payload: Any, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_fake{next(_ids):06d}")
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        path = self.path.split("?", 1)[0].rstrip("/")
        request = Request(
            body if isinstance(body, dict) else {"_body": body},
            self.path,
            self.command,
            {k.lower(): v for k, v in self.headers.items()},
        )
        self.server.fake._record(request)
        if self.command == "POST" and path == "/v1/messages/count_tokens":
            self._send_json(200, {"input_tokens": _usage(request, 0)["input_tokens"]})
        elif self.command == "POST" and path == "/v1/messages":
            self._answer(request)
        elif self.command in ("GET", "HEAD") and path in ("", "/"):
            self._send_json(200, {})
        else:
            error = {"type": "not_found_error", "message": f"fake: no route {self.command} {path}"}
            self._send_json(404, {"type": "error", "error": error})

    def _answer(self, request: Request) -> None:
        try:
            reply = self.server.fake.responder(request)
        except Exception as exc:  # noqa: BLE001 - a broken responder must fail the test, not hang it
            traceback.print_exc()
            reply = error_reply(500, f"fake responder raised {exc!r}")
        if reply.delay and self.server.fake._closed.wait(reply.delay):
            return  # the fake is shutting down: drop the connection
        if reply.status != 200:
            kind = _ERROR_TYPES.get(reply.status, "api_error")
            error = {"type": "error", "error": {"type": kind, "message": reply.message}}
            self._send_json(reply.status, error, reply.headers)
            return
        message = _message(request, reply)
        if not request.get("stream"):
            self._send_json(200, message, reply.headers)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")  # HTTP/1.0 style: the body ends at close
        self.end_headers()
        for name, data in sse_events(message):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    def _safely(self) -> None:
        try:
            self._handle()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired): nothing to answer

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = _safely


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # never wait for a handler that is sleeping out a delay
    fake: FakeAnthropic


@dataclass
class FakeAnthropic:
    """Serve the fake on 127.0.0.1:<free port> in a daemon thread while the context is open."""

    responder: Responder = field(default_factory=ScriptedResponder)
    requests: list[Request] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, kwargs={"poll_interval": 0.05}
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def messages(self) -> list[Request]:
        """The recorded POST /v1/messages bodies, oldest first."""
        with self._lock:
            return [r for r in self.requests if r.path.split("?")[0].rstrip("/") == "/v1/messages"]

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
