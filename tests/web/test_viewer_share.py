"""The viewer's share button (issue 29): in a repository that opted in, a local fragment is
moved into its team space from the fragment's page, keeping its id."""

from __future__ import annotations

import signal
from urllib.parse import urlsplit

import httpx

from lore_plugin.recall.memory import Memory
from lore_plugin.recall.storing import store_knowledge
from lore_plugin.store import Store
from tests.team_api import make_repo
from tests.web.test_viewer import start_viewer


def test_the_share_button_moves_a_fragment_into_the_repositorys_team_space(
        tmp_path, hub_url, hub_space, embedder, monkeypatch):
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    local = Memory(db, embedder, project="github.com/acme/platform-api")
    topic = store_knowledge(local, "The platform API", "Platform API", None, 0, "user").fragment
    fact = store_knowledge(local, "Handlers return problem+json", "Handlers return problem+json",
                           topic.id, 1, "user").fragment
    local.close()
    plain = make_repo(tmp_path / "plain")
    repo = make_repo(tmp_path / "repo", space=hub_space.space)
    monkeypatch.setenv("LORE_HUB_URL", hub_url)
    monkeypatch.setenv("LORE_HUB_SPACE", "local")
    pages = {}
    for folder in (plain, repo):  # the viewer's folder decides the team space
        monkeypatch.chdir(folder)
        proc, link = start_viewer(home, db)
        try:
            parts = urlsplit(link)
            client = httpx.Client(base_url=f"{parts.scheme}://{parts.netloc}", timeout=60)
            assert client.get(link).status_code == 303
            pages[folder] = client.get(f"/fragment/{fact.id}").text
            if folder == repo:
                csrf = pages[folder].split('name="csrf" value="', 1)[1].split('"', 1)[0]
                done = client.post(f"/fragment/{fact.id}/share", data={"csrf": csrf})
                assert done.status_code == 303, done.text
                assert "Shared [" in client.get("/").text
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    assert "Share with" not in pages[plain]
    assert f"Share with {hub_space.space}" in pages[repo]
    assert hub_space.has_fragment(fact.id) and hub_space.has_fragment(topic.id)
    store = Store(db)
    try:
        assert not store.has_fragment(fact.id) and store.has_fragment(topic.id)
    finally:
        store.close()
