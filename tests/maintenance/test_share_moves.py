"""`lore share ID` / `lore unshare ID`: a fragment and what is below it move between the local
file and a real team space (PostgreSQL), keeping their ids, journaled on both sides."""

from __future__ import annotations

import subprocess

import pytest

from lore_plugin.core.config import Settings
from lore_plugin.core.errors import InvalidInput
from lore_plugin.maintenance.share_moves import share, unshare
from lore_plugin.recall.storing import store_knowledge
from tests.conftest import PYTHON, python_env


@pytest.fixture()
def tree(memory):
    """topic > concept > fact > detail in the local file; returns their ids."""
    topic = store_knowledge(memory, "The platform API", "Platform API", None, 0, "user").fragment
    concept = store_knowledge(memory, "How errors are returned", "Errors", topic.id, 1,
                              "user").fragment
    fact = store_knowledge(memory, "Handlers return problem+json with a type URI",
                           "Handlers return problem+json", concept.id, 2, "user").fragment
    detail = store_knowledge(memory, "The type URI points at docs/errors", "Type URIs",
                             fact.id, 3, "user").fragment
    return topic.id, concept.id, fact.id, detail.id


def ids_in(store) -> set[str]:
    return {r["id"] for r in store.export_fragments()}


def test_share_moves_a_fact_with_its_details_and_unshare_brings_it_back(memory, tree, hub_url,
                                                                        hub_space, tmp_path):
    topic, concept, fact, detail = tree
    settings = Settings(db_path=tmp_path / "memory.db", home=tmp_path, hub_url=hub_url)
    local = memory.writer
    moved = share(settings, local, fact[:10], hub_space.space, None)
    assert (moved.fragments, moved.copied) == (2, 2)
    assert {fact, detail} <= ids_in(hub_space) and {topic, concept} <= ids_in(hub_space)
    assert {fact, detail}.isdisjoint(ids_in(local)) and {topic, concept} <= ids_in(local)
    assert hub_space.parent_id(detail) == fact and hub_space.parent_id(fact) == concept
    assert local.journal(5)[0]["action"] == "share" and hub_space.journal(5)[0]["action"] == "share"
    again = share(settings, local, topic, hub_space.space, None)  # what is there is kept as is
    assert again.fragments == 2 and ids_in(hub_space) >= {topic, concept, fact, detail}

    back = unshare(settings, local, fact, hub_space.space, None)
    assert back.fragments == 2 and {fact, detail} <= ids_in(local)
    assert {fact, detail}.isdisjoint(ids_in(hub_space))
    assert local.parent_id(fact) == concept and local.get(fact).summary == "Handlers return problem+json"
    assert local.journal(5)[0]["action"] == "unshare"


def test_text_redaction_touched_is_never_shared_by_hand(memory, hub_url, hub_space, tmp_path):
    frag = store_knowledge(memory, "staging admin uses password=hunter2hunter2", "Staging admin",
                           None, 0, "user").fragment
    settings = Settings(db_path=tmp_path / "memory.db", home=tmp_path, hub_url=hub_url)
    with pytest.raises(InvalidInput, match="redaction"):
        share(settings, memory.writer, frag.id, hub_space.space, None)
    assert frag.id in ids_in(memory.writer) and frag.id not in ids_in(hub_space)


def test_share_outside_an_opted_in_repository_says_so_in_one_line(tmp_path, isolated_home):
    env = python_env(LORE_HOME=str(isolated_home), LORE_HUB_URL="postgresql://me@localhost/x")
    proc = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "share", "0123456789abcdef"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "shares into no team space" in proc.stderr


def test_only_its_author_or_an_owner_takes_a_fact_out_of_the_team_space(tmp_path, hub_url,
                                                                        embedder, clock):
    from lore_plugin.hub.access import Team
    from lore_plugin.recall.memory import Memory
    from tests.team_api import as_role, make_roles

    roles = make_roles(hub_url, "owner", "alice", "bob")
    space = "team-" + roles["owner"].rsplit("_", 1)[1]
    with Team(as_role(hub_url, roles["owner"])) as team:
        team.create(space)
        team.add(roles["alice"], space)
        team.add(roles["bob"], space)
    homes = {}
    for who in ("alice", "bob", "owner"):
        settings = Settings(db_path=tmp_path / who / "memory.db", home=tmp_path / who,
                            hub_url=as_role(hub_url, roles[who]))
        (tmp_path / who).mkdir()
        homes[who] = (settings, Memory(settings.db_path, embedder, clock=clock))
    settings, alice = homes["alice"]
    fact = store_knowledge(alice, "Deploys go through the merge queue", "Merge queue deploys",
                           None, 0, "user").fragment
    share(settings, alice.writer, fact.id, space, None)
    settings, bob = homes["bob"]
    with pytest.raises(InvalidInput, match=f"only its author \\({roles['alice']}\\)"):
        unshare(settings, bob.writer, fact.id, space, None)
    assert fact.id not in ids_in(bob.writer)  # refused before anything was copied
    settings, owner = homes["owner"]
    assert unshare(settings, owner.writer, fact.id, space, None).fragments == 1
    assert fact.id in ids_in(owner.writer)
    for _, memory in homes.values():
        memory.close()
