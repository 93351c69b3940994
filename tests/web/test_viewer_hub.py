"""`lore ui` with a hub (issue 28): every fragment shows its space, and a search finds the
hub space's knowledge beside the local file's, each result naming where it is kept."""

from __future__ import annotations

import os
import signal
from urllib.parse import urlsplit

import httpx

from lore_plugin.hub import HubStore
from lore_plugin.recall.memory import Memory
from tests.recall.test_memory import tree
from tests.web.test_viewer import start_viewer


def test_search_names_the_space_of_each_result(tmp_path, hub_url, embedder, clock, monkeypatch):
    space = f"t{os.urandom(6).hex()}"
    hub = Memory(HubStore(hub_url, space, create_space=True), embedder, clock=clock)
    topic = hub.store("Deploying the gateway", "Gateway deployment", depth=0).id
    hub.store("The gateway deploys with helm upgrade on Tuesdays.",
              "Gateway deploys with helm on Tuesdays", parent_id=topic, depth=1)
    hub.close()
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    local = Memory(db, embedder, project="/work/project-a")
    ids = tree(local)
    local.close()
    monkeypatch.setenv("LORE_HUB_URL", hub_url)
    monkeypatch.setenv("LORE_HUB_SPACE", space)

    proc, link = start_viewer(home, db)
    try:
        parts = urlsplit(link)
        client = httpx.Client(base_url=f"{parts.scheme}://{parts.netloc}", timeout=60)
        assert client.get(link).status_code == 303
        deploys = client.get("/search", params={"q": "how is the gateway deployed",
                                                "depth": "1"}).text
        one = client.get(f"/fragment/{ids['pg']}").text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)

    first = deploys.split('<div class="result">')[1]
    assert "Gateway deploys with helm" in first and f"space {space}" in first
    assert "space local" in deploys  # the local file's matches are named too
    assert "space local" in one
