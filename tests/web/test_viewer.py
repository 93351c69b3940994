"""`lore ui` over real HTTP: the server runs as `python -m lore_plugin.cli ui --no-browser`
on a real database, and every endpoint is checked for the cookie, the Host header and (for
writes) cross-site requests, then for what it shows and what it changes. The attacks of issue
25 and the route table's write routes are in test_viewer_trust.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.embedder import assemble_from_packages
from lore_plugin.recall.memory import Memory
from lore_plugin.store import Store
from lore_plugin.web.app import login_link
from tests.conftest import MODEL_CACHE, PYTHON, python_env
from tests.recall.test_memory import tree

GETS = ["/", "/children?id={db}", "/search?q=invoices", "/fragment/{pg}", "/activity",
        "/activity/doctor",
        "/static/app.css", "/static/app.js"]
POSTS = ["/fragment/{css}/edit", "/fragment/{css}/correct", "/fragment/{css}/forget",
         "/fragment/{css}/move", "/fragment/{css}/confirm", "/merge", "/undo/1", "/retry"]


@dataclass
class Viewer:
    base: str
    port: int
    home: Path
    db: Path
    ids: dict[str, str]
    proc: subprocess.Popen[bytes]

    def link(self) -> str:
        """A new one-time login link, as `lore ui --url` makes it."""
        return login_link(json.loads((self.home / "ui.json").read_text()))

    def client(self) -> httpx.Client:
        """A browser-like client: it has traded a link's one-time code for the cookie."""
        client = httpx.Client(base_url=self.base, follow_redirects=False, timeout=60)
        first = client.get(self.link())
        assert first.status_code == 303, first.text
        return client

    def csrf(self, client: httpx.Client) -> str:
        page = client.get(f"/fragment/{self.ids['pg']}").text
        return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]

    def store(self) -> closing[Store]:
        """`with viewer.store() as store:` opens the viewer's database beside it, and closes it."""
        return closing(Store(self.db))


def viewer_env(home: Path, db: Path) -> dict[str, str]:
    model = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    assert model is not None, "the embedding model packages must be installed"
    env = python_env(LORE_HOME=str(home), LORE_DB_PATH=str(db), LORE_EMBED_MODEL_DIR=str(model),
                     LORE_NO_DOWNLOAD="1")
    env.pop("LORE_CONFIG", None)
    return env


def start_viewer(home: Path, db: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """The viewer's process and a one-time login link to it."""
    proc = subprocess.Popen([PYTHON, "-m", "lore_plugin.cli", "ui", "--no-browser", *args],
                            env=viewer_env(home, db), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            data = json.loads((home / "ui.json").read_text())
            if data["pid"] == proc.pid:
                return proc, login_link(data)
        except (OSError, ValueError):
            pass
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read().decode())  # type: ignore[union-attr]
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the viewer did not publish its URL")


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[Viewer]:
    yield from running_viewer(tmp_path_factory, embedder)


def running_viewer(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[Viewer]:
    """A viewer on the small realistic memory (tests.recall.test_memory.tree), until closed."""
    root = tmp_path_factory.mktemp("viewer")
    home, db = root / "home", root / "home" / "memory.db"
    memory = Memory(db, embedder, project="/work/project-a")
    ids = tree(memory)
    memory.close()
    proc, url = start_viewer(home, db)
    parts = urlsplit(url)
    try:
        yield Viewer(f"{parts.scheme}://{parts.netloc}", parts.port or 0, home, db, ids, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def urls(viewer: Viewer, paths: list[str]) -> list[str]:
    return [p.format(**viewer.ids) for p in paths]


# -- the guard ----------------------------------------------------------------------------
def test_no_endpoint_answers_without_the_token(viewer):
    bare = httpx.Client(base_url=viewer.base, timeout=60)
    for path in urls(viewer, GETS):
        answer = bare.get(path)
        assert answer.status_code == 403, path
        assert "invoices" not in answer.text and "PostgreSQL" not in answer.text
    for path in urls(viewer, POSTS):
        assert bare.post(path, data={"summary": "x"}).status_code == 403, path
    wrong = httpx.Client(base_url=viewer.base, timeout=60, cookies={"lore_ui": "guess"})
    assert wrong.get("/").status_code == 403
    assert wrong.get("/?token=guess").status_code == 403


def test_a_wrong_host_header_is_refused_even_with_the_token(viewer):
    client = viewer.client()
    for host in ("evil.example", f"evil.example:{viewer.port}", f"127.0.0.1:{viewer.port + 1}",
                 f"localhost.evil.example:{viewer.port}", ""):
        for path in urls(viewer, GETS):
            assert client.get(path, headers={"host": host}).status_code == 403, (host, path)
    assert client.get("/", headers={"host": f"localhost:{viewer.port}"}).status_code == 200


def test_the_links_code_becomes_an_httponly_strict_cookie_and_leaves_the_address_bar(viewer):
    client = httpx.Client(base_url=viewer.base, timeout=60)
    link = urlsplit(viewer.link())
    first = client.get(link.path + "?" + link.query)
    assert first.status_code == 303 and first.headers["location"] == "/"
    cookie = first.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    import http.client

    raw = http.client.HTTPConnection("127.0.0.1", viewer.port, timeout=60)
    raw.request("GET", f"//evil.example/x?{urlsplit(viewer.link()).query}")
    assert raw.getresponse().getheader("location") == "/evil.example/x"  # never off-site
    page = client.get("/")
    assert page.status_code == 200 and "Billing database" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "same-origin"


def test_cross_site_writes_are_refused_and_change_nothing(viewer):
    client = viewer.client()
    csrf = viewer.csrf(client)
    target = f"/fragment/{viewer.ids['css']}/edit"
    form = {"csrf": csrf, "summary": "HACKED", "content": "HACKED"}
    attempts = [
        ({}, {**form, "csrf": ""}),
        ({}, {**form, "csrf": "wrong"}),
        ({"origin": "http://evil.example"}, form),
        ({"origin": f"http://127.0.0.1:{viewer.port + 1}"}, form),
        ({"sec-fetch-site": "cross-site"}, form),
        ({"sec-fetch-site": "same-site"}, form),
    ]
    for headers, data in attempts:
        assert client.post(target, data=data, headers=headers).status_code == 403, headers
    assert client.get(target.replace("/edit", "") + "/edit").status_code == 405  # GET never writes
    with viewer.store() as store:
        assert store.get(viewer.ids["css"]).summary == "Tailwind only, no CSS-in-JS"
    same = client.post(target, data={**form, "summary": "Tailwind only",
                                     "content": "Styling uses Tailwind; no CSS-in-JS."},
                       headers={"origin": viewer.base, "sec-fetch-site": "same-origin"})
    assert same.status_code == 303


# -- the pages ----------------------------------------------------------------------------
def test_the_tree_lists_topics_with_counts_and_loads_children_on_demand(viewer):
    client = viewer.client()
    page = client.get("/").text
    assert "Billing database" in page and "Dashboard frontend" in page
    assert f'data-src="/children?id={viewer.ids["db"]}"' in page
    assert "PostgreSQL for invoices" not in page  # not loaded until opened
    kids = client.get(f"/children?id={viewer.ids['db']}")
    assert kids.status_code == 200 and "PostgreSQL for invoices" in kids.text
    assert f'data-src="/children?id={viewer.ids["pg"]}"' in kids.text  # it has children too
    leaf = client.get(f"/children?id={viewer.ids['pool']}").text
    assert leaf == ""
    assert client.get("/children?id=zz").status_code == 400
    css = client.get("/static/app.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "fetch(" in client.get("/static/app.js").text
    assert client.get("/static/nope.js").status_code == 404
    assert client.get("/?page=-1").status_code == 400


def test_search_ranks_as_query_memory_does_and_shows_match_and_relevance(viewer, embedder):
    client = viewer.client()
    page = client.get("/search", params={"q": "which database holds invoices", "depth": "1"}).text
    memory = Memory(viewer.db, embedder)
    try:
        expected = memory.query("which database holds invoices", depth=1, reinforce=False)
    finally:
        memory.close()
    shown = [p.split('"', 1)[0] for p in page.split('<div class="result"><a href="/fragment/')[1:]]
    assert shown == [s.fragment.id for s in expected.fragments]
    assert "match " in page
    assert "relevance " in page and "similarity " in page
    assert '<option selected>/work/project-a</option>' in client.get(
        "/search", params={"q": "x", "project": "/work/project-a"}).text
    facts = client.get("/search", params={"q": "ERR_7731", "depth": "any"}).text
    assert viewer.ids["pool"] in facts
    assert client.get("/search", params={"q": "x", "depth": "9"}).status_code == 400


def test_the_fragment_page_shows_provenance_neighbours_and_history(viewer):
    client = viewer.client()
    page = client.get(f"/fragment/{viewer.ids['pg']}").text
    for needle in ("PostgreSQL 16 with logical replication", "agent-stored", "Billing database",
                   "ERR_7731 means the pool is exhausted", "relevance", "created",
                   "/work/project-a"):
        assert needle in page, needle
    assert client.get(f"/fragment/{viewer.ids['pg'][:10]}").status_code == 200  # prefixes work
    assert client.get("/fragment/0123456789abcdef").status_code == 404


def test_memory_text_is_shown_as_text_never_as_markup(viewer, embedder):
    memory = Memory(viewer.db, embedder)
    try:
        fid = memory.store("<script>alert(1)</script><img src=x onerror=alert(2)>",
                           "<b>bold</b> claim", parent_id=viewer.ids["react"], depth=2).id
    finally:
        memory.close()
    client = viewer.client()
    page = client.get(f"/fragment/{fid}").text
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>bold</b>" not in page
    kids = client.get(f"/children?id={viewer.ids['react']}").text
    assert "&lt;b&gt;bold&lt;/b&gt;" in kids


def test_the_activity_page_shows_sessions_parked_batches_usage_consolidation_and_doctor(viewer):
    with viewer.store() as store:
        store.insert(NewFragment("Deploys run from CI only.", "CI-only deploys", 2,
                                 source_session="sess-activity-1", source="user"), time.time(),
                     None, viewer.ids["react"])
        transcript = viewer.home / "parked.jsonl"
        transcript.write_text("")
        store.record_failure(str(transcript), 0, 10, "LLM said no", time.time(), 1.0, 1)
        store.record_usage(time.time(), "extract", None, "claude-haiku-4-5", 1200, 300, 0.0027)
    ran = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "consolidate", "--force"],
                         env=viewer_env(viewer.home, viewer.db), capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 0, ran.stderr
    client = viewer.client()
    page = client.get("/activity").text
    assert "sess-activity-1" in page and "CI-only deploys" in page
    assert str(transcript) in page and "LLM said no" in page and ">Retry<" in page
    usage = page.split('<pre id="usage">', 1)[1].split("</pre>", 1)[0]
    assert "today: 1 call, 1,200 in + 300 out tokens" in usage and "backend" in usage
    assert "Finished" in page and "consolidated in" in page and "relevance" in page
    assert "1 transcript batch(es) parked" in page.split('id="problems"')[1]
    assert 'data-src="/activity/doctor"' in page
    os.chmod(viewer.db, 0o644)  # a problem `lore doctor` finds
    try:
        checks = client.get("/activity/doctor").text
    finally:
        os.chmod(viewer.db, 0o600)
    assert "ok · integrity" in checks and "<b>problem</b> · file modes" in checks
    assert "lore doctor --fix" in checks
    csrf = viewer.csrf(client)
    retried = client.post("/retry", data={"csrf": csrf, "file_path": str(transcript),
                                          "start": "0"})
    assert retried.status_code == 303
    with viewer.store() as store:
        assert not store.failures(parked_only=True)
    assert client.post("/retry", data={"csrf": csrf, "file_path": "/nope.jsonl",
                                       "start": "0"}).status_code == 400


# -- curation over HTTP -------------------------------------------------------------------
def test_each_curation_form_changes_memory_and_the_activity_page_undoes_it(viewer):
    client = viewer.client()
    csrf = viewer.csrf(client)
    ids = viewer.ids
    steps = [
        (f"/fragment/{ids['vacuum']}/edit", {"summary": "Vacuum runs weekly",
                                             "content": "Autovacuum runs on Sundays."}),
        (f"/fragment/{ids['vacuum']}/confirm", {}),
        (f"/fragment/{ids['detail']}/move", {"parent": ids["pool"]}),
    ]
    with viewer.store() as store:
        before = [(f.summary, f.confirmed_at, f.parent_id) for f in
                  (store.get(ids["vacuum"]), store.get(ids["detail"]))]
    for path, data in steps:
        done = client.post(path, data={"csrf": csrf, **data})
        assert done.status_code == 303 and done.headers["location"].startswith("/fragment/")
        assert 'id="flash"' in client.get(done.headers["location"]).text
    with viewer.store() as store:
        assert store.get(ids["vacuum"]).summary == "Vacuum runs weekly"
        assert store.get(ids["vacuum"]).confirmed_at is not None
        assert store.get(ids["detail"]).parent_id == ids["pool"]
        entries = [e["id"] for e in store.journal(3)]
    page = client.get("/activity").text
    for entry in entries:
        assert f'action="/undo/{entry}"' in page
        assert client.post(f"/undo/{entry}", data={"csrf": csrf}).status_code == 303
    with viewer.store() as store:
        after = [(f.summary, f.confirmed_at, f.parent_id) for f in
                 (store.get(ids["vacuum"]), store.get(ids["detail"]))]
    assert after == before
    assert client.post(f"/undo/{entries[0]}", data={"csrf": csrf}).status_code == 400


def test_correct_merge_and_forget_over_http(viewer, embedder):
    memory = Memory(viewer.db, embedder)
    try:
        topic = memory.store("Release process notes", "Release process", depth=0).id
        concept = memory.store("Releases are cut on Mondays.", "Monday release cut",
                               parent_id=topic, depth=1).id
        other = memory.store("Shipping checklist", "Shipping", depth=0).id
    finally:
        memory.close()
    client = viewer.client()
    csrf = viewer.csrf(client)
    fixed = client.post(f"/fragment/{concept}/correct",
                        data={"csrf": csrf, "summary": "Tuesday release cut",
                              "content": "Releases are cut on Tuesdays."})
    new_id = fixed.headers["location"].rsplit("/", 1)[1]
    assert new_id != concept and "replaces" in client.get(f"/fragment/{new_id}").text
    merged = client.post("/merge", data={"csrf": csrf, "victim": other, "survivor": topic})
    assert merged.headers["location"] == f"/fragment/{topic}"
    page = client.get("/activity").text
    assert "merged “Shipping” into “Release process”" in page
    gone = client.post(f"/fragment/{topic}/forget", data={"csrf": csrf, "children": "1"})
    assert gone.status_code == 303 and gone.headers["location"] == "/"
    assert "Forgot" in client.get("/").text
    assert "forgetting erases the text for good" in client.get("/activity").text
    assert client.get(f"/fragment/{new_id}").status_code == 404
    refused = client.post(f"/fragment/{viewer.ids['db']}/forget", data={"csrf": csrf})
    assert refused.status_code == 400 and "children" in refused.text


# -- starting it --------------------------------------------------------------------------
def test_the_url_file_is_owner_only_and_lore_ui_url_prints_a_link_to_the_running_viewer(viewer):
    assert os.stat(viewer.home / "ui.json").st_mode & 0o077 == 0
    done = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "ui", "--url"],
                          env=viewer_env(viewer.home, viewer.db), capture_output=True,
                          text=True, timeout=60)
    link = done.stdout.strip()
    assert done.returncode == 0 and link.startswith(viewer.base + "/?token=")
    client = httpx.Client(base_url=viewer.base, timeout=60)
    assert client.get(link).status_code == 303 and client.get("/").status_code == 200
    # /lore:memory puts the link in the transcript: its code never reaches extraction or memory.
    from lore_plugin.safety.redact import redact

    code = link.split("token=", 1)[1]
    assert code not in redact(f"Lore's memory viewer is at: {link}")


def test_lore_ui_url_starts_a_viewer_when_none_runs_and_it_cleans_up_on_sigterm(tmp_path):
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    env = viewer_env(home, db)
    done = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "ui", "--url"], env=env,
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    url = done.stdout.strip()
    pid = json.loads((home / "ui.json").read_text())["pid"]
    try:
        parts = urlsplit(url)
        assert parts.hostname == "127.0.0.1"
        client = httpx.Client(base_url=f"http://{parts.netloc}", timeout=60)
        assert client.get(f"/?{parts.query}").status_code == 303
        assert "Memory is empty" in client.get("/").text
    finally:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while (home / "ui.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (home / "ui.json").exists()


def test_a_chosen_port_is_used_and_the_server_listens_on_loopback_only(tmp_path):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    proc, url = start_viewer(home, db, "--port", str(port))
    try:
        assert urlsplit(url).port == port
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True,
                             text=True, timeout=30).stdout
        assert [line.split()[3] for line in out.splitlines()] == [f"127.0.0.1:{port}"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


# -- /lore:memory inside Claude Code ------------------------------------------------------
@pytest.mark.slow
def test_the_memory_command_hands_claude_the_url_of_a_viewer_it_started(tmp_path):
    """The real Claude Code CLI runs /lore:memory against a fake API: the command's shell
    line starts a viewer through the launcher, and the model receives its working URL."""
    from tests.claude_cli import claude_binary, claude_env
    from tests.conftest import ROOT
    from tests.fake_anthropic import FakeAnthropic, text_reply
    from tests.service_running import stop_service

    bodies: list[str] = []

    def model(body: dict) -> object:
        bodies.append(json.dumps(body.get("messages", [])))
        return text_reply("Here is your viewer.")

    home, project, lore = tmp_path / "home", tmp_path / "project", tmp_path / "lore"
    project.mkdir()
    with FakeAnthropic(model) as api:
        env = claude_env(home, ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="dummy",
                         LORE_PYTHON=PYTHON, PYTHONPATH=str(ROOT), LORE_HOME=str(lore),
                         **{k: v for k, v in viewer_env(lore, lore / "memory.db").items()
                            if k in ("LORE_EMBED_MODEL_DIR", "LORE_NO_DOWNLOAD")})
        done = subprocess.run([str(claude_binary()), "-p", "/lore:memory", "--plugin-dir",
                               str(ROOT)], cwd=project, env=env, capture_output=True,
                              text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    running = json.loads((lore / "ui.json").read_text())
    try:
        said = [m for b in bodies for m in re.findall(
            rf"viewer is at: {re.escape(running['url'])}\?token=([\w-]+)", b)]
        assert said, bodies  # a link with a one-time code, not the bare address
        parts = urlsplit(running["url"])
        client = httpx.Client(base_url=f"http://{parts.netloc}", timeout=60)
        assert client.get(f"/?token={said[0]}").status_code == 303
        assert client.get("/").status_code == 200
    finally:
        os.kill(running["pid"], signal.SIGTERM)
        stop_service(lore)  # the memory service the session's MCP front started


def test_a_viewer_left_unused_stops_by_itself_and_removes_its_url(tmp_path):
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    proc, _ = start_viewer(home, db, "--idle-minutes", "0.05")  # three seconds
    assert proc.wait(timeout=60) == 0
    assert not (home / "ui.json").exists()
