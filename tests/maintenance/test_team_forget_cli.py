"""`lore forget ID` on a team space's fragment (issue 29): through the real CLI, in a folder
whose repository shares into the space, only its author or an owner of the space may forget
it; a refusal is one line and changes nothing; every deletion is journaled by the database."""

from __future__ import annotations

import subprocess
import time

import psycopg

from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore
from lore_plugin.hub.access import Team
from tests.conftest import PYTHON, python_env
from tests.team_api import as_role, make_repo, make_roles


def _lore(home, url: str, cwd, *args: str) -> subprocess.CompletedProcess:
    env = python_env(LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"),
                     LORE_HUB_URL=url, LORE_HUB_SPACE="local")
    return subprocess.run([PYTHON, "-m", "lore_plugin.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_lore_forget_reaches_a_team_fragment_for_its_author_and_owners_only(tmp_path, hub_url):
    roles = make_roles(hub_url, "owner", "alice", "bob", "reader")
    urls = {k: as_role(hub_url, r) for k, r in roles.items()}
    space = "team-" + roles["owner"].rsplit("_", 1)[1]
    with Team(urls["owner"]) as team:
        team.create(space)
        team.add(roles["alice"], space)
        team.add(roles["bob"], space)
        team.add(roles["reader"], space, "reader")
    repo = make_repo(tmp_path / "repo", space=space)
    alice = HubStore(urls["alice"], space)
    try:
        now = time.time()
        topic = alice.insert(NewFragment(content="Deploys", summary="Deploys", depth=0), now)
        facts = [alice.insert(NewFragment(content=f"Deploy rule {n}.", summary=f"Deploy rule {n}",
                                          depth=2), now, parent_id=topic) for n in (1, 2, 3)]
    finally:
        alice.close()
    homes = {k: tmp_path / k for k in roles}
    for home in homes.values():
        home.mkdir()

    for who in ("bob", "reader"):  # a member who did not write it, a reader: refused
        proc = _lore(homes[who], urls[who], repo, "forget", facts[0][:12])
        assert proc.returncode == 1 and proc.stdout == "", proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert f"only its author ({roles['alice']}) or an owner of {space}" in proc.stderr
    topic_refused = _lore(homes["bob"], urls["bob"], repo, "forget", "--cascade", topic[:12])
    assert topic_refused.returncode == 1 and "nothing was forgotten" in topic_refused.stderr

    mine = _lore(homes["alice"], urls["alice"], repo, "forget", facts[0][:12])  # the author
    assert mine.returncode == 0, mine.stderr
    assert f"forgot 1 fragment(s) of the team space {space}" in mine.stdout
    owned = _lore(homes["owner"], urls["owner"], tmp_path, "forget", "--space", space,
                  facts[1][:12])  # an owner, anywhere, naming the space
    assert owned.returncode == 0, owned.stderr
    unknown = _lore(homes["alice"], urls["alice"], tmp_path, "forget", "0123456789abcdef")
    assert unknown.returncode == 1 and "no fragment" in unknown.stderr  # no team space here

    with psycopg.connect(hub_url, autocommit=True) as su:
        left = {r[0] for r in su.execute("SELECT id FROM fragments WHERE space = %s", (space,))}
        journal = [tuple(r) for r in su.execute(
            "SELECT fragment_id, author FROM curation_journal WHERE space = %s AND "
            "action = 'delete' ORDER BY id", (space,))]
    assert left == {topic, facts[2]}
    assert journal == [(facts[0], roles["alice"]), (facts[1], roles["owner"])]
