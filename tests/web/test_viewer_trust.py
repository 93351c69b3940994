"""The viewer under attack (issue 25, "Trust, round 2", and issue 26's route coverage): another
local account holding the cookie or a login link, links that outlive their use, a secret typed
into an edit, a number too big for SQLite, and every write route of the app's route table
checked for the CSRF token, Origin, Host and the cookie."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lore_plugin.web.actions import ACTIONS
from lore_plugin.web.app import ROUTES, login_link
from lore_plugin.web.peer import peer_uid
from lore_plugin.web.security import COOKIE, Guard, Secrets
from tests.conftest import PYTHON
from tests.web.test_viewer import Viewer, running_viewer, viewer_env

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
SECRET = "ghp" + "_" + "Tr7uStR0uNd2x9Qw4Ez8Lk3Mn6Bv1Cx5Zp0A"  # a GitHub token's shape
AWS_ID = "AKIA" + "QX7T2M9KZB4LW8RA"
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the kernel's socket tables are Linux's")

# A client that another local account runs: the standard library only, so the system's Python
# can run it as `nobody` without reading anything of the user's.
OTHER_ACCOUNT = """
import http.client, json, sys
port, cookie, csrf, fid, link = json.loads(sys.argv[1])
out = []
for method, path, body, headers in [
        ("GET", "/search?q=invoices", None, {"Cookie": cookie}),
        ("POST", f"/fragment/{fid}/edit", f"csrf={csrf}&summary=HACKED&content=HACKED",
         {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}),
        ("GET", link, None, {})]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, body=body, headers={"Host": f"127.0.0.1:{port}", **headers})
    answer = conn.getresponse()
    out.append([answer.status, answer.read().decode(errors="replace")])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[Viewer]:
    yield from running_viewer(tmp_path_factory, embedder)


def signed_in(viewer: Viewer) -> tuple[httpx.Client, str]:
    client = viewer.client()
    return client, viewer.csrf(client)


# -- 1. the cookie reaches any server on 127.0.0.1 -------------------------------------------
@linux_only
@pytest.mark.skipif(os.geteuid() != 0 or not Path(SYSTEM_PYTHON).exists(),
                    reason="acting as another account needs root (and a Python it can run)")
def test_another_local_account_with_the_users_cookie_and_link_is_refused(viewer):
    client, csrf = signed_in(viewer)
    cookie = f"{COOKIE}={client.cookies[COOKIE]}"
    link = viewer.link().removeprefix(viewer.base)
    args = json.dumps([viewer.port, cookie, csrf, viewer.ids["react"], link])
    done = subprocess.run([SYSTEM_PYTHON, "-I", "-c", OTHER_ACCOUNT, args], user=NOBODY,
                          group=NOBODY, extra_groups=[], cwd="/", env={"PATH": "/usr/bin"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    assert [status for status, _ in answers] == [403, 403, 403]
    assert all("only the account that started the viewer" in text for _, text in answers)
    assert "invoices" not in answers[0][1]
    with viewer.store() as store:
        assert store.get(viewer.ids["react"]).summary == "React dashboard stack"
    # The same cookie and the same link still work for the user: the attempt spent nothing.
    assert httpx.get(f"{viewer.base}/search?q=invoices", headers={"cookie": cookie},
                     timeout=60).status_code == 200
    assert httpx.get(viewer.base + link, timeout=60).status_code == 303


@linux_only
def test_the_owner_of_a_loopback_connection_is_read_from_the_kernels_tables():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        there = server.getsockname()
        with socket.create_connection(there) as client:
            assert peer_uid(client.getsockname(), there) == os.getuid()
            assert peer_uid(there, client.getsockname()) == os.getuid()  # the server's end
        with socket.socket(socket.AF_INET6) as dual:  # a dual-stack client, v4-mapped
            dual.connect(("::ffff:127.0.0.1", there[1]))
            assert peer_uid(dual.getsockname()[:2], there) == os.getuid()
        with socket.socket() as idle:  # bound, connected to nothing
            idle.bind(("127.0.0.1", 0))
            assert peer_uid(idle.getsockname(), there) is None
    assert peer_uid(("testclient", 50000), there) is None


@linux_only
def test_the_guard_refuses_a_request_whose_connection_it_cannot_place():
    """Fails closed: a valid cookie over a connection the kernel does not list is refused."""
    async def ok(scope, receive, send) -> None:  # noqa: ANN001
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"memory"})

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        there = server.getsockname()
        secrets_ = Secrets(port=there[1])
        guard = Guard(ok, secrets_)
        with socket.create_connection(there) as live:
            statuses = [_status(guard, secrets_, client)
                        for client in (live.getsockname(), ("127.0.0.1", 9), None)]
    assert statuses == [200, 403, 403]


def _status(guard: Guard, secrets_: Secrets, client: tuple[str, int] | None) -> int:
    scope = {"type": "http", "method": "GET", "path": "/", "query_string": b"",
             "headers": [(b"host", f"127.0.0.1:{secrets_.port}".encode()),
                         (b"cookie", f"{COOKIE}={secrets_.session}".encode())],
             "client": client, "server": ("127.0.0.1", secrets_.port)}
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    return int(sent[0]["status"])


# -- 2. the token on the browser's command line, and in logs/ui.out --------------------------
def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        assert proc.poll() is None, proc.stdout.read().decode()  # type: ignore[union-attr]
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


def test_the_browser_is_opened_with_a_code_that_works_once_and_no_file_holds_the_session(
        tmp_path):
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    seen = tmp_path / "browser-argv"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > "{seen}"\n')
    browser.chmod(stat.S_IRWXU)
    proc = subprocess.Popen([PYTHON, "-m", "lore_plugin.cli", "ui"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            env={**viewer_env(home, db), "BROWSER": str(browser)})
    try:
        link = _wait_for(seen, proc)  # what `ps` showed every account while it ran
        base = link.split("?", 1)[0].rstrip("/")
        user = httpx.Client(base_url=base, timeout=60)
        assert user.get(link).status_code == 303 and user.get("/").status_code == 200
        again = httpx.get(link, timeout=60)
        assert again.status_code == 403 and "used already or has expired" in again.text
        assert httpx.get(f"{base}/", timeout=60).status_code == 403
        session = user.cookies[COOKIE]
        assert session not in link and session not in (home / "ui.json").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0].decode()
    assert session not in out and link in out  # the terminal shows the spent link only


def test_a_background_viewer_writes_no_login_code_to_its_log_and_clears_old_tokens(tmp_path):
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    log = home / "logs" / "ui.out"
    log.parent.mkdir(parents=True)
    log.write_text("Lore's viewer: http://127.0.0.1:4242/?token=an-old-runs-token\n")
    done = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "ui", "--url"],
                          env=viewer_env(home, db), capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    running = json.loads((home / "ui.json").read_text())
    try:
        link = done.stdout.strip()
        assert httpx.get(link, timeout=60).status_code == 303
        assert httpx.get(link, timeout=60).status_code == 403  # spent
        fresh = login_link(running)  # another `lore ui --url`: a new code, good once
        assert fresh != link and httpx.get(fresh, timeout=60).status_code == 303
    finally:
        os.kill(running["pid"], signal.SIGTERM)
    deadline = time.monotonic() + 30
    while (home / "ui.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    text = log.read_text()
    assert "an-old-runs-token" not in text and "token=" not in text
    assert f"listens on {running['url']}" in text
    assert os.stat(log).st_mode & 0o077 == 0


# -- 3. a secret typed into an edit -----------------------------------------------------------
def test_a_secret_typed_into_an_edit_reaches_neither_the_journal_nor_the_page_nor_the_files(
        viewer):
    client, csrf = signed_in(viewer)
    fid = viewer.ids["detail"]
    # The label quotes 60 characters: the second summary's key id is cut there, where a
    # redaction after the cut would no longer know it.
    for summary in (f"Vacuum cron deploys with {SECRET}",
                    f"The vacuum cron job deploys to S3 with key id {AWS_ID} (rotated)"):
        done = client.post(f"/fragment/{fid}/edit", data={
            "csrf": csrf, "summary": summary, "content": f"token {SECRET} in the cron"})
        assert done.status_code == 303, done.text
    page = client.get("/activity").text
    assert "edited" in page and SECRET[:20] not in page and AWS_ID[:10] not in page
    with viewer.store() as store:
        labels = [e["label"] for e in store.journal(10)]
        assert any("[REDACTED" in label for label in labels)
        assert not any(SECRET[:20] in x or AWS_ID[:10] in x for x in labels)
    for suffix in ("", "-wal"):
        path = viewer.db.with_name(viewer.db.name + suffix)
        if path.exists():
            data = path.read_bytes()
            assert SECRET[:20].encode() not in data and AWS_ID[:10].encode() not in data


# -- 4. a number too big for SQLite -----------------------------------------------------------
def test_numbers_too_big_for_sqlite_are_not_found_or_refused_never_a_crash(viewer):
    client, csrf = signed_in(viewer)
    for entry in ("9223372036854775808", "9" * 40):
        answer = client.post(f"/undo/{entry}", data={"csrf": csrf})
        assert answer.status_code == 404, answer.text
        assert "no journal entry" in answer.text
    for start in ("9" * 40, "-1"):
        answer = client.post("/retry", data={"csrf": csrf, "file_path": "/x.jsonl",
                                             "start": start})
        assert answer.status_code == 400 and "byte offset" in answer.text


# -- issue 26: every write route from the route table -----------------------------------------
def _filled(path: str, params: dict[str, list[str]]) -> list[str]:
    """The route's path with each parameter given every sample value."""
    out = [path]
    for name, values in params.items():
        for key in (f"{{{name}}}", f"{{{name}:int}}"):
            if any(key in p for p in out):
                out = [p.replace(key, value) for p in out for value in values]
    missing = [p for p in out if "{" in p]
    assert not missing, f"give the new route's parameter a sample value here: {missing}"
    return out


def _routes(viewer: Viewer, writes: bool) -> list[str]:
    samples = {"fid": [viewer.ids["react"]], "action": list(ACTIONS), "entry": ["1"],
               "name": ["app.css"]}
    paths = []
    for route in ROUTES:
        is_write = bool(set(route.methods or ()) - {"GET", "HEAD"})
        if is_write == writes:
            paths += _filled(route.path, {n: samples.get(n, []) for n in route.param_convertors})
    return paths


def test_every_write_route_in_the_route_table_needs_csrf_origin_host_and_cookie(viewer):
    client, csrf = signed_in(viewer)
    with viewer.store() as store:
        before = (len(store.journal(1000)), store.get(viewer.ids["react"]).summary)
    # A form that would change something on any of the routes, were it let through.
    form = {"csrf": csrf, "summary": "HACKED", "content": "HACKED", "children": "1",
            "parent": viewer.ids["db"], "victim": viewer.ids["ui"], "survivor": viewer.ids["db"],
            "file_path": "/nope.jsonl", "start": "0"}
    no_cookie = httpx.Client(base_url=viewer.base, timeout=60)
    paths = _routes(viewer, writes=True)
    assert {"/merge", "/undo/1", "/retry", f"/fragment/{viewer.ids['react']}/edit"} <= set(paths)
    for path in paths:
        attempts = {
            "no csrf": (client, {}, {k: v for k, v in form.items() if k != "csrf"}),
            "wrong csrf": (client, {}, {**form, "csrf": "guess"}),
            "cross origin": (client, {"origin": "http://evil.example"}, form),
            "cross site": (client, {"sec-fetch-site": "cross-site"}, form),
            "wrong host": (client, {"host": f"evil.example:{viewer.port}"}, form),
            "no cookie": (no_cookie, {}, form),
        }
        for what, (who, headers, data) in attempts.items():
            answer = who.post(path, data=data, headers=headers)
            assert answer.status_code == 403, (path, what, answer.status_code, answer.text[:200])
    with viewer.store() as store:
        assert (len(store.journal(1000)), store.get(viewer.ids["react"]).summary) == before


def test_every_read_route_in_the_route_table_needs_the_cookie(viewer):
    bare = httpx.Client(base_url=viewer.base, timeout=60)
    paths = _routes(viewer, writes=False)
    assert "/activity" in paths and "/static/app.css" in paths
    for path in paths:
        assert bare.get(path).status_code == 403, path
