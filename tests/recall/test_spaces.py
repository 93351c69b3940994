"""Fused reads across spaces: one ranked answer from the local file and other spaces, each
result naming its space, on one scale; a space that cannot answer is named, not fatal.

A second SQLite file stands in for a second space here, to test the fusion on its own; the
same reads over a real PostgreSQL hub space are in tests/recall/test_spaces_hub.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lore_plugin.core.errors import LoreError, NotFound
from lore_plugin.core.types import ScoredFragment
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.spaces import Spaces, fuse


@pytest.fixture()
def other(tmp_path: Path, embedder, clock):
    mem = Memory(tmp_path / "other.db", embedder, clock=clock)
    yield mem
    mem.close()


def seed(local: Memory, other: Memory) -> dict[str, str]:
    ids = {}
    topic = local.store("Databases used in the billing service", "Billing database", depth=0).id
    ids["pg"] = local.store("The billing service stores invoices in PostgreSQL 16.",
                            "Invoices live in PostgreSQL 16", parent_id=topic, depth=1).id
    ids["css"] = local.store("Styling uses Tailwind; no CSS-in-JS libraries are allowed.",
                             "Tailwind only for styling", parent_id=topic, depth=1).id
    hub_topic = other.store("Deploying the gateway", "Gateway deployment", depth=0).id
    ids["deploy"] = other.store("The gateway deploys with helm upgrade from the ops repo on "
                                "Tuesdays after the change review.",
                                "Gateway deploys with helm on Tuesdays", parent_id=hub_topic,
                                depth=1).id
    ids["pool"] = other.store("Connection pool exhaustion shows up as ERR_7731 in the gateway "
                              "logs.", "ERR_7731 means the pool is exhausted",
                              parent_id=hub_topic, depth=1).id
    return ids


def test_the_best_match_ranks_first_whichever_space_holds_it(memory: Memory, other: Memory) -> None:
    ids = seed(memory, other)
    spaces = Spaces(memory, {"personal": lambda: other})

    about_deploys = spaces.query("how does the gateway get deployed?", depth=1, limit=4)
    about_invoices = spaces.query("where are invoices stored?", depth=1, limit=4)

    assert about_deploys.hits[0].space == "personal"
    assert about_deploys.hits[0].fragment.id == ids["deploy"]
    assert about_invoices.hits[0].space == "local"
    assert about_invoices.hits[0].fragment.id == ids["pg"]
    assert {h.space for h in about_deploys.hits} == {"local", "personal"}
    assert about_deploys.unreachable == {}
    spaces.close()


def test_a_space_whose_best_match_is_weak_is_not_ranked_as_if_it_were_strong(
        memory: Memory, other: Memory) -> None:
    """Each space's engine scales its own best to about 1; without the cross-space scale the
    weak space's best would tie with the strong space's best."""
    ids = seed(memory, other)
    css, pool = memory.get(ids["css"]), other.get(ids["pool"])
    per_space = {"local": [ScoredFragment(css, 1.1, 0.2)],
                 "personal": [ScoredFragment(pool, 1.1, 0.8)]}

    hits = fuse(per_space, "connection pool exhausted", limit=2)

    assert [h.space for h in hits] == ["personal", "local"]
    assert hits[1].scored.score < 0.3 * hits[0].scored.score
    assert hits[0].scored.similarity == 0.8  # the cosine is kept as it was


def test_an_unreachable_space_is_named_and_the_others_answer(memory: Memory, other: Memory,
                                                           ) -> None:
    ids = seed(memory, other)
    opened: list[float] = []

    def down() -> Memory:
        opened.append(time.monotonic())
        raise LoreError("the hub at db.example.com:5432 did not answer: connection refused")

    spaces = Spaces(memory, {"personal": down})
    found = spaces.query("where are invoices stored?", depth=1, limit=3)
    again = spaces.query("where are invoices stored?", depth=1, limit=3)

    assert found.hits[0].fragment.id == ids["pg"]
    assert "connection refused" in found.unreachable["personal"]
    assert "personal" in again.unreachable
    assert len(opened) == 1  # not knocked on again at once
    spaces.close()


def test_a_slow_space_is_left_out_within_the_time_allowed(memory: Memory, other: Memory) -> None:
    seed(memory, other)

    def slow() -> Memory:
        time.sleep(2.0)
        return other

    spaces = Spaces(memory, {"personal": slow}, timeout=0.5)
    started = time.monotonic()
    found = spaces.query("where are invoices stored?", depth=1, limit=3)

    assert time.monotonic() - started < 1.5
    assert found.hits and all(h.space == "local" for h in found.hits)
    assert "no answer within" in found.unreachable["personal"]
    spaces.close()


def test_a_fragment_is_found_in_the_space_that_holds_it(memory: Memory, other: Memory) -> None:
    ids = seed(memory, other)
    spaces = Spaces(memory, {"personal": lambda: other})

    assert spaces.locate(ids["deploy"])[0] == "personal"
    assert spaces.locate(ids["pg"][:12])[0] == "local"
    with pytest.raises(NotFound):
        spaces.locate("f" * 32)
    space, tree = spaces.explore("gateway deployment")
    assert space == "personal" and {c.fragment.id for c in tree.children} == {ids["deploy"],
                                                                               ids["pool"]}
    spaces.close()
