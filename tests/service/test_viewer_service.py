"""The viewer's searches through the memory service (web/served.py, the `search` op): a real
service process answers them and the viewer loads neither the model nor the vector index;
with no service to be had, the viewer searches in-process, with the same results."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.embedding.embedder import LocalEmbedder
from lore_plugin.recall.memory import Memory
from lore_plugin.web.served import ServedMemory
from tests.conftest import MODEL_CACHE
from tests.service.test_service import client, home, model_dir, store  # noqa: F401 (fixtures)

FACTS = [("Deploys happen on Thursday at 09:00 UTC, agreed with the team.",
          "The deploy window is Thursday 09:00 UTC"),
         ("The mailer retries five times before it gives up on a host.",
          "Mailer retry limit is five"),
         ("Billing invoices are generated on the first day of each month.",
          "Billing invoices go out on the first of the month")]


def viewer_memory(at: Path) -> ServedMemory:
    return ServedMemory(at.parent / "memory.db", LocalEmbedder(MODEL_CACHE), str(at))


def ranked(found) -> list[str]:  # type: ignore[no-untyped-def]
    return [s.fragment.summary for s in found.fragments]


def test_the_viewers_searches_are_answered_by_the_service_without_a_model_or_index_here(
        home: Path):  # noqa: F811
    writer = client(home)
    for content, summary in FACTS:
        store(writer, content, summary)
    viewer = viewer_memory(home)
    try:
        queried = viewer.query("when can we ship to production", depth=2, limit=3,
                               reinforce=False)
        searched = viewer.search("how often does the mailer try again", limit=3)
        assert viewer.served == 2
        assert viewer._index is None and viewer.embedder._model is None  # type: ignore[attr-defined]
        assert ranked(queried)[0] == FACTS[0][1] and ranked(searched)[0] == FACTS[1][1]
        assert queried.fragments[0].fragment.content == FACTS[0][0]  # rows read here, whole
    finally:
        viewer.close()
    alone = Memory(home.parent / "memory.db", LocalEmbedder(MODEL_CACHE))
    try:  # what the viewer searching in-process would show: the same, in the same order
        assert ranked(alone.query("when can we ship to production", depth=2, limit=3,
                                  reinforce=False)) == ranked(queried)
        assert ranked(alone.search("how often does the mailer try again", limit=3)) == \
            ranked(searched)
    finally:
        alone.close()


def test_with_no_service_to_be_had_the_viewer_searches_in_process(
        home: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: F811
    monkeypatch.setenv("LORE_SERVICE", "off")
    seed = Memory(home.parent / "memory.db", LocalEmbedder(MODEL_CACHE))
    try:
        from lore_plugin.recall.storing import store_knowledge

        for content, summary in FACTS:
            store_knowledge(seed, content, summary)
    finally:
        seed.close()
    viewer = viewer_memory(home)
    try:
        found = viewer.query("when can we ship to production", depth=2, limit=3,
                             reinforce=False)
        assert viewer.served == 0 and ranked(found)[0] == FACTS[0][1]
    finally:
        viewer.close()
