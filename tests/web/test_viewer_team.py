"""The viewer's team part of the activity page (issue 29): started in a repository that shares
into a team space, it shows the member the facts teammates corrected (both authors, as the
database recorded them) with an Undo, and their own facts in the space with an Unshare that
moves one back to the local file; each button is a POST with the run's CSRF token, and the
database's rules hold (another member's fact is not the viewer's to unshare)."""

from __future__ import annotations

import html
import signal
import time
from urllib.parse import urlsplit

import httpx

from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore
from lore_plugin.hub.access import Team
from lore_plugin.recall.memory import Memory
from lore_plugin.store import Store
from tests.team_api import as_role, make_repo, make_roles
from tests.web.test_viewer import start_viewer

OLD = "Platform API deploys ride the Tuesday train"
NEW = "Platform API deploys ride the Thursday train"
KEPT = "Platform API handlers return problem+json"
BOBS = "Platform API pagination uses offsets"
OWNERS = "Platform API pagination uses cursors"


def _fact(store: HubStore, topic: str, summary: str) -> str:
    return store.insert(NewFragment(content=summary + ".", summary=summary, depth=2),
                        time.time(), parent_id=topic)


def test_activity_shows_a_teammate_s_correction_with_undo_and_unshares_the_member_s_fact(
        tmp_path, hub_url, embedder, monkeypatch):
    roles = make_roles(hub_url, "owner", "alice", "bob")  # alice and bob: plain members
    urls = {k: as_role(hub_url, r) for k, r in roles.items()}
    space = "team-" + roles["owner"].rsplit("_", 1)[1]
    with Team(urls["owner"]) as team:
        team.create(space)
        team.add(roles["alice"], space)
        team.add(roles["bob"], space)
    alice, bob = HubStore(urls["alice"], space), HubStore(urls["bob"], space)
    try:
        topic = alice.insert(NewFragment(content="Platform API", summary="Platform API",
                                         depth=0), time.time())
        old, kept = _fact(alice, topic, OLD), _fact(alice, topic, KEPT)
        new = _fact(bob, topic, NEW)
        bob.supersede(old, new, time.time())
        # A correction between two teammates: alice wrote neither fact, and may undo it.
        owner = HubStore(urls["owner"], space)
        try:
            bobs, owners = _fact(bob, topic, BOBS), _fact(owner, topic, OWNERS)
            owner.supersede(bobs, owners, time.time())
        finally:
            owner.close()
    finally:
        bob.close()
        alice.close()
    home, db = tmp_path / "home", tmp_path / "home" / "memory.db"
    Memory(db, embedder).close()
    monkeypatch.chdir(make_repo(tmp_path / "repo", space=space))
    monkeypatch.setenv("LORE_HUB_URL", urls["alice"])
    monkeypatch.setenv("LORE_HUB_SPACE", "local")
    proc, link = start_viewer(home, db)
    try:
        parts = urlsplit(link)
        client = httpx.Client(base_url=f"{parts.scheme}://{parts.netloc}", timeout=60)
        assert client.get(link).status_code == 303
        page = client.get("/activity").text
        csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        assert f"Team space {space}" in page
        assert f"{roles['bob']} replaced your “{OLD}” with “{NEW}”" in page
        assert f'action="/fragment/{old}/uncorrect"' in page
        assert f'action="/fragment/{kept}/unshare"' in page and KEPT in page
        assert f'action="/fragment/{new}/unshare"' not in page  # bob's, not alice's to list
        assert (html.escape(f"{roles['owner']} replaced {roles['bob']}'s “{BOBS}” with "
                            f"“{OWNERS}”") in page.split('id="team-other-corrections"', 1)[1])
        theirs = page.split(f'action="/fragment/{bobs}/uncorrect"', 1)[1].split(
            'name="entry" value="', 1)[1].split('"', 1)[0]
        assert client.post(f"/fragment/{bobs}/uncorrect",
                           data={"csrf": csrf, "entry": theirs}).status_code == 303
        check = HubStore(urls["bob"], space)
        try:
            assert check.get(bobs).superseded_by is None  # a third member's undo took
        finally:
            check.close()

        assert client.post(f"/fragment/{old}/uncorrect", data={"entry": "1"}).status_code == 403
        entry = page.split(f'action="/fragment/{old}/uncorrect"', 1)[1].split(
            'name="entry" value="', 1)[1].split('"', 1)[0]
        undone = client.post(f"/fragment/{old}/uncorrect", data={"csrf": csrf, "entry": entry})
        assert undone.status_code == 303, undone.text
        again = client.get("/activity").text
        assert "is live again" in again and f"undone by {roles['alice']}" in again

        refused = client.post(f"/fragment/{new}/unshare", data={"csrf": csrf})
        assert refused.status_code == 400 and f"only its author ({roles['bob']})" in refused.text
        moved = client.post(f"/fragment/{kept}/unshare", data={"csrf": csrf})
        assert moved.status_code == 303, moved.text
        assert KEPT in client.get(moved.headers["location"]).text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    hub = HubStore(hub_url, space)
    try:
        assert hub.get(old).superseded_by is None
        assert [c.undone_by for c in hub.corrections()] == [roles["alice"]] * 2
        assert not hub.has_fragment(kept) and hub.has_fragment(new)
    finally:
        hub.close()
    store = Store(db)
    try:
        assert store.has_fragment(kept) and not store.has_fragment(new)
    finally:
        store.close()
