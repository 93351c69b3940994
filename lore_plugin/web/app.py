"""The viewer's application and server: routes, error pages, and `serve()`, which binds
127.0.0.1 on a free port and publishes its address and the key that signs login codes.

Starlette and uvicorn come with the mcp SDK already (it serves MCP over HTTP with them), so
the viewer adds no dependency; they give a tested HTTP/1.1 parser, form parsing and routing
that a stdlib `http.server` would have us write and secure ourselves."""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from ..core.config import Settings
from ..core.errors import LoreError, NotFound
from ..core.private import create_private
from ..recall.memory import Memory
from . import actions, activity, pages
from .html import CSS, JS, page
from .security import Guard, Secrets, login_url
from .viewer import Viewer

log = logging.getLogger(__name__)
URL_FILE = "ui.json"  # under LORE_HOME: the running viewer's address and code key, owner-only


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name == "app.css":
        return Response(CSS, media_type="text/css")
    if name == "app.js":
        return Response(JS, media_type="text/javascript")
    return Response("not found", status_code=404, media_type="text/plain")


async def on_error(request: Request, exc: Exception) -> Response:
    """Domain errors become a page that says what went wrong; anything else is logged."""
    if isinstance(exc, LoreError):
        status = 404 if isinstance(exc, NotFound) else 400
        return HTMLResponse(page("Cannot do that", '<p><a href="/">Back to the topics</a></p>',
                                 error=str(exc)), status_code=status)
    log.exception("viewer: %s %s failed", request.method, request.url.path)
    return HTMLResponse(page("Something went wrong", "<p>The details are in the log.</p>",
                             error=f"{type(exc).__name__}"), status_code=500)


# The route table. Every route that is not a GET is a write: tests/web take the write
# routes from here and check each for the CSRF token, Origin, Host and the cookie.
ROUTES = [
    Route("/", pages.tree),
    Route("/children", pages.children),
    Route("/search", pages.search),
    Route("/fragment/{fid}", pages.fragment),
    Route("/activity", activity.activity_page),
    Route("/activity/doctor", activity.doctor_checks),
    Route("/static/{name}", static),
    Route("/fragment/{fid}/{action}", actions.fragment_action, methods=["POST"]),
    Route("/merge", actions.merge, methods=["POST"]),
    Route("/undo/{entry:int}", actions.undo, methods=["POST"]),
    Route("/retry", actions.retry, methods=["POST"]),
]


def build_app(viewer: Viewer) -> Guard:
    app = Starlette(routes=ROUTES, exception_handlers={LoreError: on_error, Exception: on_error})
    app.state.viewer = viewer
    return Guard(app, viewer.secrets)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def publish(home: Path, secrets_: Secrets) -> Path:
    """Writes, owner-only, where the viewer listens and the key that signs its login codes,
    for `lore ui --url` to make a link from. The session cookie's value is never written."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = home / URL_FILE
    tmp = home / f".{URL_FILE}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    with open(create_private(tmp), "w") as fh:
        json.dump({"url": secrets_.address(), "pid": os.getpid(),
                   "key": base64.b64encode(secrets_.code_key).decode()}, fh)
    tmp.replace(target)
    return target


def published(home: Path) -> dict[str, Any] | None:
    """The running viewer's {url, pid, key}, or None when the file is missing or stale (its
    process is gone, or nothing listens on its port: the pid may have been reused)."""
    try:
        data = json.loads((home / URL_FILE).read_text())
        os.kill(int(data["pid"]), 0)
        port = urlsplit(str(data["url"])).port
        base64.b64decode(str(data["key"]), validate=True)
        with socket.create_connection(("127.0.0.1", port or 0), timeout=2):
            pass
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data


def login_link(running: dict[str, Any]) -> str:
    """A link to the running viewer that signs in once: a new one-time code each call."""
    return login_url(str(running["url"]), base64.b64decode(str(running["key"])), time.time())


def _owner(url_file: Path) -> int | None:
    try:
        return int(json.loads(url_file.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _judged_connections(guard: Guard) -> type:
    """uvicorn's HTTP protocol, telling the guard when each connection opens and closes, so
    the account behind it is looked up once per connection rather than once per request."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    base: Any = AutoHTTPProtocol

    class JudgedConnection(base):  # type: ignore[misc]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            ends = _ends(transport)
            if ends is not None:  # else each request is looked up, and refused (security.py)
                guard.opened(*ends)

        def connection_lost(self, exc: Exception | None) -> None:
            ends = _ends(self.transport)
            if ends is not None:
                guard.closed(*ends)
            super().connection_lost(exc)

    return JudgedConnection


def _ends(transport: Any) -> tuple[tuple[str, int], tuple[str, int]] | None:
    """(client, server) as the ASGI scope names them, or None for a socket without both."""
    try:
        peer, me = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
        return (str(peer[0]), int(peer[1])), (str(me[0]), int(me[1]))
    except (TypeError, IndexError, ValueError, AttributeError):
        return None


def serve(settings: Settings, memory: Memory, port: int = 0,
          on_ready: Callable[[str], None] | None = None, idle_minutes: float = 0) -> None:
    """Runs until interrupted, or with `idle_minutes` until no request came for that long (a
    viewer started in the background by /lore:memory must not run forever). `on_ready` gets
    a one-time login link once the socket listens."""
    import uvicorn

    secrets_ = Secrets(port=port or free_port())
    viewer = Viewer(settings, memory, secrets_)
    guard = build_app(viewer)
    config = uvicorn.Config(guard, host="127.0.0.1", port=secrets_.port,
                            log_level="warning", access_log=False, lifespan="off",
                            server_header=False, proxy_headers=False,
                            http=_judged_connections(guard))
    server = uvicorn.Server(config)
    url_file = None

    async def main() -> None:
        nonlocal url_file
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            while not server.started:
                if server.should_exit:
                    return
                await anyio.sleep(0.05)
            url_file = publish(settings.home, secrets_)
            # The vector index loads now, not on the first search.
            tg.start_soon(viewer.run, lambda: memory.search("warm up", limit=1))
            if on_ready is not None:
                on_ready(login_url(secrets_.address(), secrets_.code_key, time.time()))
            while idle_minutes and not server.should_exit:
                await anyio.sleep(min(30.0, idle_minutes * 60 / 4))
                if time.monotonic() - guard.last_request > idle_minutes * 60:
                    log.info("viewer: idle for %s minutes, stopping", idle_minutes)
                    server.should_exit = True

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    # uvicorn re-raises the SIGTERM it caught once it has shut down; ending through this
    # handler (not the default one) lets the URL file be removed below.
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if url_file is not None and _owner(url_file) == os.getpid():
            url_file.unlink(missing_ok=True)
        memory.close()
