"""Fused reads with a real hub space (PostgreSQL + pgvector): the local file and the space
answer as one, each result naming its space; knowledge in both (pushed) is shown once; a hub
that is down is named while the local file answers, within the time allowed."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from lore_plugin.capture.hub_link import spaces_for
from lore_plugin.core.config import Settings
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.spaces import Spaces


def test_local_and_hub_knowledge_rank_together_each_naming_its_space(
        memory: Memory, hub_space, embedder, clock) -> None:
    hub = Memory(hub_space, embedder, clock=clock)
    topic = memory.store("Databases used in the billing service", "Billing database", depth=0).id
    pg = memory.store("The billing service stores invoices in PostgreSQL 16.",
                      "Invoices live in PostgreSQL 16", parent_id=topic, depth=1).id
    gate = hub.store("Deploying the gateway", "Gateway deployment", depth=0).id
    helm = hub.store("The gateway deploys with helm upgrade from the ops repo on Tuesdays.",
                     "Gateway deploys with helm on Tuesdays", parent_id=gate, depth=1).id
    spaces = Spaces(memory, {hub_space.space: lambda: hub})

    deploys = spaces.query("how is the gateway deployed?", depth=1, limit=3)
    invoices = spaces.query("where are invoices stored?", depth=1, limit=3)

    assert (deploys.hits[0].space, deploys.hits[0].fragment.id) == (hub_space.space, helm)
    assert (invoices.hits[0].space, invoices.hits[0].fragment.id) == ("local", pg)
    assert deploys.unreachable == {} and invoices.unreachable == {}
    spaces.close()


def test_a_fragment_pushed_to_the_hub_is_answered_once(memory: Memory, hub_space, embedder,
                                                        clock) -> None:
    topic = memory.store("Deploying the gateway", "Gateway deployment", depth=0).id
    helm = memory.store("The gateway deploys with helm upgrade on Tuesdays.",
                        "Gateway deploys with helm on Tuesdays", parent_id=topic, depth=1).id
    hub_space.insert_rows(list(memory.reader.export_fragments()),
                          list(memory.reader.export_edges()))
    hub = Memory(hub_space, embedder, clock=clock)
    spaces = Spaces(memory, {hub_space.space: lambda: hub})

    found = spaces.query("how is the gateway deployed?", depth=1, limit=5)

    assert [h.fragment.id for h in found.hits].count(helm) == 1
    spaces.close()


def test_a_stopped_hub_is_named_and_the_local_file_answers_in_time(
        tmp_path: Path, memory: Memory) -> None:
    topic = memory.store("Databases used in the billing service", "Billing database", depth=0).id
    memory.store("The billing service stores invoices in PostgreSQL 16.",
                 "Invoices live in PostgreSQL 16", parent_id=topic, depth=1)
    nowhere = f"postgresql://postgres@/postgres?host={tmp_path}/no-server"
    settings = replace(Settings(db_path=tmp_path / "m.db", home=tmp_path), hub_url=nowhere,
                       hub_space="personal")

    spaces = spaces_for(settings, memory, timeout=3.0)
    started = time.monotonic()
    found = spaces.query("where are invoices stored?", depth=1, limit=3)

    assert time.monotonic() - started < 3.5
    assert found.hits and found.hits[0].space == "local"
    assert "cannot connect" in found.unreachable["personal"]
    spaces.close()
