"""The viewer's guard, in front of every route: another local account or a web page the user
happens to open must not read or change the memory through it.

- The server binds to 127.0.0.1 only (app.py).
- On Linux, a request is answered only when the account that opened its connection is the
  viewer's own (peer.py): a browser hands a host's cookies to every port of that host, so
  another account's server on another port can catch the cookie, but cannot use it.
- Host must be 127.0.0.1:PORT or localhost:PORT: a DNS-rebinding page reaches the port under
  its own name, and is turned away here before anything else runs.
- The session is a random value, new each run, that lives only in this process and in the
  browser as an HttpOnly, SameSite=Strict cookie. No URL carries it. A URL carries a one-time
  code instead (`?token=`, a name redaction knows), signed with a per-run key that only
  `ui.json` (owner-only) holds: the first visit trades it for the cookie and it is worthless
  afterwards, so the copies a browser's command line, a terminal or a transcript keep open
  nothing. An unused code expires after CODE_TTL.
- Every write is a POST that carries the run's CSRF token as a form field, and the browser's
  Origin and Sec-Fetch-Site, when sent, must say the request came from this very origin.
- Answers are never cached, never framed, send no Referer elsewhere, and may load nothing from
  elsewhere (Content-Security-Policy)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .peer import Address, checkable, peer_uid

COOKIE = "lore_ui"
CODE = "token"  # the login code's query parameter: redaction knows the name and hides it
CODE_TTL = 15 * 60  # seconds an unused login code stays good: time to click a printed link
NONCE, STAMP, MAC = 16, 8, 16  # a code's parts, in bytes
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
    """The run's secrets and the port they are valid on."""

    port: int = 0
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))  # the cookie
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    code_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))  # signs codes
    spent: dict[bytes, int] = field(default_factory=dict)  # used codes' nonces, until expiry

    def origins(self) -> set[str]:
        return {f"http://127.0.0.1:{self.port}", f"http://localhost:{self.port}"}

    def hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    def address(self) -> str:
        """Where the viewer listens: no secret in it, safe for logs."""
        return f"http://127.0.0.1:{self.port}/"

    def redeem(self, code: str, now: float) -> bool:
        """True once for a code this run's key signed, unexpired; False ever after."""
        try:
            raw = base64.urlsafe_b64decode(code + "=" * (-len(code) % 4))
        except (ValueError, TypeError):
            return False
        if len(raw) != NONCE + STAMP + MAC:
            return False
        body, mac = raw[:-MAC], raw[-MAC:]
        if not hmac.compare_digest(mac, _sign(self.code_key, body)):
            return False
        nonce, expires = body[:NONCE], int.from_bytes(body[NONCE:], "big")
        self.spent = {n: t for n, t in self.spent.items() if t >= now}  # forget the expired
        if not now <= expires <= now + CODE_TTL + 1 or nonce in self.spent:
            return False
        self.spent[nonce] = expires
        return True


def _sign(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, body, hashlib.sha256).digest()[:MAC]


def login_url(address: str, code_key: bytes, now: float) -> str:
    """`address` with a fresh one-time code: what `lore ui` opens and `--url` prints."""
    body = secrets.token_bytes(NONCE) + int(now + CODE_TTL).to_bytes(STAMP, "big")
    code = base64.urlsafe_b64encode(body + _sign(code_key, body)).decode().rstrip("=")
    return f"{address}?{urlencode({CODE: code})}"


def _same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def forbidden(reason: str) -> Response:
    return PlainTextResponse(f"403 Forbidden: {reason}\n", status_code=403, headers=HEADERS)


class Guard:
    """ASGI middleware: checks the account behind the connection, Host, the session cookie (or
    trades a one-time code for it) and, for writes, cross-site signals; then calls the app and
    adds the security headers to whatever it answers."""

    def __init__(self, app: ASGIApp, secrets_: Secrets) -> None:
        self.app = app
        self.secrets = secrets_
        self.last_request = time.monotonic()  # of any request, for the idle stop (app.serve)
        # Whether each open connection's account is ours, judged once when it opened (app.py
        # calls opened/closed): reading the kernel's table costs milliseconds, and per request
        # it would double a page's time. A verdict lives exactly as long as its connection, so
        # a later connection that reuses the port is judged afresh.
        self.peers: dict[tuple[Address, Address], bool] = {}

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
        if CODE in query and scope["method"] in SAFE_METHODS:
            # A login code is spent even when the cookie already lets the browser in.
            if not (self.secrets.redeem(query[CODE], time.time()) or self._signed_in(scope)):
                await forbidden("this link was used already or has expired; `lore ui --url` "
                                "or /lore:memory gives a new one")(scope, receive, send)
                return
            # Trade the code for the cookie, and drop it from the address bar.
            rest = urlencode({k: v for k, v in query.items() if k != CODE})
            # One leading slash: "//host/…" would send the browser to another site.
            target = "/" + scope["path"].lstrip("/") + (f"?{rest}" if rest else "")
            response = RedirectResponse(target, status_code=303, headers=HEADERS)
            response.set_cookie(COOKIE, self.secrets.session, httponly=True,
                                samesite="strict", path="/")
            await response(scope, receive, send)
            return
        if not self._signed_in(scope):
            await forbidden("open the viewer through the link `lore ui` printed or opened "
                            "(`lore ui --url` gives a new one)")(scope, receive, send)
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

    def _signed_in(self, scope: Scope) -> bool:
        return _same(_cookie(Headers(scope=scope).get("cookie", "")), self.secrets.session)

    def opened(self, client: Address, server: Address) -> None:
        if checkable():
            self.peers[(client, server)] = _owned_here(client, server)

    def closed(self, client: Address, server: Address) -> None:
        self.peers.pop((client, server), None)

    def _same_account(self, scope: Scope) -> bool:
        """The connection was opened by this process's own user (unknown counts as not)."""
        client, server = scope.get("client"), scope.get("server")
        if not client or not server:
            return False
        key = ((str(client[0]), int(client[1])), (str(server[0]), int(server[1] or 0)))
        known = self.peers.get(key)
        return _owned_here(*key) if known is None else known

    def refusal(self, scope: Scope) -> Response | None:
        """What refuses a request before its credentials are even looked at."""
        if checkable() and not self._same_account(scope):
            return forbidden("only the account that started the viewer may use it")
        headers = Headers(scope=scope)
        if headers.get("host", "").lower() not in self.secrets.hosts():
            return forbidden("this server answers only to 127.0.0.1 or localhost on its port")
        if scope["method"] not in SAFE_METHODS:
            origin = headers.get("origin")
            if origin is not None and origin not in self.secrets.origins():
                return forbidden("a cross-site request may not change memory")
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                return forbidden("a cross-site request may not change memory")
        return None


def _owned_here(client: Address, server: Address) -> bool:
    return peer_uid(client, server) == os.getuid()


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def check_csrf(secrets_: Secrets, form_value: object) -> bool:
    """The form field every write carries (pages.py puts it in each form)."""
    return isinstance(form_value, str) and _same(form_value, secrets_.csrf)
