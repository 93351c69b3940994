"""The viewer's guard, in front of every route: another local account or a web page the user
happens to open must not read or change the memory through it.

- The server binds to 127.0.0.1 only (app.py).
- Host must be 127.0.0.1:PORT or localhost:PORT: a DNS-rebinding page reaches the port under
  its own name, and is turned away here before anything else runs.
- A random token, new each run, must come with every request: first in the URL the user was
  given, which answers with a redirect that sets it as an HttpOnly, SameSite=Strict cookie (so
  the token leaves the address bar and history), then in that cookie.
- Every write is a POST that carries the run's CSRF token as a form field, and the browser's
  Origin and Sec-Fetch-Site, when sent, must say the request came from this very origin.
- Answers are never cached, never framed, send no Referer elsewhere, and may load nothing from
  elsewhere (Content-Security-Policy)."""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "lore_ui"
HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # Not no-referrer: under it a browser sends `Origin: null` with a form POST, and the
    # origin check below could not tell this page's forms from anyone else's.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
SAFE_METHODS = {"GET", "HEAD"}


@dataclass
class Secrets:
    """The run's two secrets and the port they are valid on."""

    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def origins(self) -> set[str]:
        return {f"http://127.0.0.1:{self.port}", f"http://localhost:{self.port}"}

    def hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}?{urlencode({'token': self.token})}"


def _same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def forbidden(reason: str) -> Response:
    return PlainTextResponse(f"403 Forbidden: {reason}\n", status_code=403, headers=HEADERS)


class Guard:
    """ASGI middleware: checks Host, token and (for writes) cross-site signals, then calls the
    app and adds the security headers to whatever it answers."""

    def __init__(self, app: ASGIApp, secrets_: Secrets) -> None:
        self.app = app
        self.secrets = secrets_
        self.last_request = time.monotonic()  # of any request, for the idle stop (app.serve)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan events carry no request
            await self.app(scope, receive, send)
            return
        self.last_request = time.monotonic()
        refused = self.refusal(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query and scope["method"] in SAFE_METHODS:
            # Trade the URL token for the cookie, and drop it from the address bar.
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            # One leading slash: "//host/…" would send the browser to another site.
            target = "/" + scope["path"].lstrip("/") + (f"?{rest}" if rest else "")
            response = RedirectResponse(target, status_code=303, headers=HEADERS)
            response.set_cookie(COOKIE, self.secrets.token, httponly=True, samesite="strict",
                                path="/")
            await response(scope, receive, send)
            return

        started = time.perf_counter()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = list(message.get("headers", []))
                have = {k.lower() for k, _ in raw}
                raw += [(k.encode(), v.encode()) for k, v in HEADERS.items()
                        if k.encode() not in have]
                # How long the page took to build, for the browser's tools and the benchmark.
                took = (time.perf_counter() - started) * 1000
                raw.append((b"server-timing", f"app;dur={took:.1f}".encode()))
                message = {**message, "headers": raw}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        if headers.get("host", "").lower() not in self.secrets.hosts():
            return forbidden("this server answers only to 127.0.0.1 or localhost on its port")
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        cookie = _cookie(headers.get("cookie", ""))
        if not (_same(cookie, self.secrets.token) or _same(query.get("token"), self.secrets.token)):
            return forbidden("open the viewer through the URL `lore ui` printed (it carries "
                             "this run's token)")
        if scope["method"] not in SAFE_METHODS:
            origin = headers.get("origin")
            if origin is not None and origin not in self.secrets.origins():
                return forbidden("a cross-site request may not change memory")
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                return forbidden("a cross-site request may not change memory")
        return None


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def check_csrf(secrets_: Secrets, form_value: object) -> bool:
    """The form field every write carries (pages.py puts it in each form)."""
    return isinstance(form_value, str) and _same(form_value, secrets_.csrf)
