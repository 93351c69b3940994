"""The thin MCP front: what each Claude Code session's `lore mcp` runs. It speaks MCP's stdio
JSON-RPC itself (the handshake-era methods Claude Code uses) and forwards every tool call to
the one memory service of the Lore home, which it starts when none runs.

Why not the SDK here: importing it alone takes 0.6 s and 64 MB (bench/README.md, "One warm
memory per machine"), past the front's budget of 0.5 s and 70 MB. So `initialize` and
`tools/list` answer from tool_list.json, generated from the SDK's definitions (tool_list.py),
and the answers to tool calls are the service's, which builds them with the same code the
in-process server uses (service/answers.py). Standard library only, until a fallback.

Fallback: `LORE_SERVICE=off` or no Unix sockets run the in-process SDK server instead
(tools.main); a service that cannot be started or keeps dying is replaced, for the rest of
the session, by the same tools run in this process (local.py)."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from .. import __version__
from .tool_list import PATH as TOOL_LIST

log = logging.getLogger("lore.server")
MAX_MESSAGE = 8 << 20  # one JSON-RPC message from the client; a store is at most ~20K characters
CALL_THREADS = 4  # tool calls forwarded at once; pings and lists never wait for them
EMPTY_LISTS = {"prompts/list": "prompts", "resources/list": "resources",
               "resources/templates/list": "resourceTemplates"}  # what the SDK server has


class Front:
    def __init__(self, out: IO[bytes], client: Any, local: Any) -> None:
        """`client`: a service.client.ServiceClient; `local`: makes the in-process fallback
        (called once, the first time the service cannot be had)."""
        self.out, self.client, self._make_local = out, client, local
        self.spec = json.loads(TOOL_LIST.read_text(encoding="utf-8"))
        self._write = threading.Lock()
        self._local: Any = None
        self._local_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(CALL_THREADS, thread_name_prefix="lore-front")

    # -- the stdio loop -------------------------------------------------------------------
    def serve(self, stream: IO[bytes]) -> None:
        try:
            while True:
                line = stream.readline(MAX_MESSAGE + 1)
                if not line:
                    return
                if len(line) > MAX_MESSAGE and not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):  # the rest of that message
                        line = stream.readline(MAX_MESSAGE)
                    self.error(None, -32600, "message too large")
                    continue
                if line.strip():
                    self.message(line)
        finally:
            self._pool.shutdown(wait=True)  # calls in flight finish: a store is not cut off
            self.close()

    def message(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            self.error(None, -32700, "Parse error")
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            if isinstance(msg, dict) and "id" in msg and ("result" in msg or "error" in msg):
                return  # an answer to a request we never make
            self.error(msg.get("id") if isinstance(msg, dict) else None, -32600,
                       "Invalid Request")
            return
        method, ident, params = msg["method"], msg.get("id"), msg.get("params")
        if ident is None:
            return  # a notification: initialized, cancelled, roots changed; none needs us
        params = params if isinstance(params, dict) else {}
        if method == "initialize":
            self.reply(ident, self.initialize(params))
        elif method == "ping":
            self.reply(ident, {})
        elif method == "tools/list":
            self.reply(ident, {"tools": self.spec["tools"]})
        elif method == "tools/call":
            self._pool.submit(self.call, ident, params)
        elif method in EMPTY_LISTS:
            self.reply(ident, {EMPTY_LISTS[method]: []})
        else:
            self.error(ident, -32601, "Method not found")

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        versions = self.spec["protocol_versions"]
        threading.Thread(target=self.kick, name="lore-kick", daemon=True).start()
        return {"protocolVersion": requested if requested in versions else self.spec["latest"],
                "capabilities": self.spec["capabilities"],
                "serverInfo": {"name": self.spec["server_name"], "version": __version__},
                "instructions": self.spec["instructions"]}

    def kick(self) -> None:
        """The service starts warming while Claude Code is still setting up, not at the first
        tool call."""
        try:
            if self.client.usable:
                self.client.ready()
                # Its repository's team space (issue 29) opens now, not at the first prompt.
                self.client.request("open", {"cwd": os.getcwd()})
        except Exception as exc:  # the first call tries again, or falls back
            log.info("memory service not started at initialize: %s", exc)

    # -- tool calls -----------------------------------------------------------------------
    def call(self, ident: Any, params: dict[str, Any]) -> None:
        name, arguments = params.get("name"), params.get("arguments")
        try:
            self.reply(ident, self.forward(str(name), arguments if arguments is not None else {}))
        except Exception:  # never a dead front: the call fails, the session goes on
            log.exception("tool call %s failed in the front", name)
            self.reply(ident, {"content": [{"type": "text",
                                            "text": f"Error executing tool {name}"}],
                               "isError": True})

    def forward(self, name: str, arguments: object) -> dict[str, Any]:
        from ..service.client import Unavailable

        if self.client.usable:
            try:
                answer = self.client.request("tool", {"name": name, "arguments": arguments})
                if isinstance(answer.get("content"), list):
                    return answer
                log.warning("the memory service answered %s with %r", name, answer)
            except Unavailable as exc:
                if exc.may_have_run and name == "store_memory":  # never stored twice at once
                    return {"content": [{"type": "text", "text": (
                        f"Error executing tool {name}: {exc}; it may still be stored. Check "
                        "with query_memory before storing it again.")}], "isError": True}
                log.warning("memory service unavailable (%s); this session serves itself", exc)
        return self.local().run(name, arguments)

    def local(self) -> Any:
        with self._local_lock:
            if self._local is None:
                self._local = self._make_local()
            return self._local

    # -- output -----------------------------------------------------------------------------
    def reply(self, ident: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": ident, "result": result})

    def error(self, ident: Any, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})

    def send(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        with self._write:
            try:
                self.out.write(data)
                self.out.flush()
            except (OSError, ValueError):  # the session has gone; nothing to tell
                pass

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
        self.client.close()


def main() -> None:
    from ..service.protocol import enabled

    if not enabled():
        from .tools import main as in_process

        in_process()
        return
    from ..core.config import load_settings
    from ..core.private import lock_down
    from ..core.project import project_key
    from ..safety.logs import setup_logging
    from ..service.client import ServiceClient

    settings = load_settings()
    lock_down(settings.home, settings.db_path)
    setup_logging(settings.log_dir, "server", stderr=True)
    project = project_key(os.getcwd())
    client = ServiceClient(str(settings.home), str(settings.db_path), project)

    def local() -> Any:
        from .local import Local

        return Local.open(settings, project)

    Front(sys.stdout.buffer, client, local).serve(sys.stdin.buffer)
