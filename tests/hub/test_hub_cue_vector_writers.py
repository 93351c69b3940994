"""Who fills a hub space's cue vectors (issue 30): the writers that hold the model, after
their own commit. `lore hub push` carries cues and the other side's vectors of them (pull
too), and embeds the rest; the service's stores, the ingestion worker's hub spaces and a hub
space's consolidation fill what is due; a failure leaves them due and never reaches the
write."""

from __future__ import annotations

import time

import pytest

from lore_plugin.capture.routing import Routes
from lore_plugin.consolidation.hub_spaces import run_hub_if_overdue
from lore_plugin.core.config import Settings
from lore_plugin.core.errors import LLMUnavailable
from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.cue_vectors import closest, decode
from lore_plugin.hub import HubStore
from lore_plugin.maintenance import hub_sync
from lore_plugin.recall.cue_vector_fill import fill_cue_vectors
from lore_plugin.recall.cue_vector_upkeep import fill_after_write
from lore_plugin.store import Store
from tests.hub.conftest import CUES, SECRET, local_atlas


def _settings(tmp_path, hub_url: str, space: str = "personal") -> Settings:
    return Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home", hub_url=hub_url,
                    hub_space=space)



def _no_llm(settings: Settings):
    raise LLMUnavailable("no LLM in this test")


def test_a_push_carries_cues_and_the_pushing_client_embeds_them(tmp_path, hub_url, hub_space,
                                                                embedder):
    local, topic, fact = local_atlas(tmp_path / "memory.db")
    settings = _settings(tmp_path, hub_url)
    done = hub_sync.push(settings, local, hub_space.space, embedder=embedder)
    assert (done.fragments, done.cue_vectors) == (2, 1)
    got = hub_space.cue_vectors([fact, topic])
    assert list(got) == [fact] and decode(got[fact]).shape == (2, 384)
    for phrase in CUES.splitlines():
        assert closest(embedder.embed([phrase])[0], got[fact]) == pytest.approx(1.0, abs=0.01)
    assert hub_sync.push(settings, local, hub_space.space, embedder=embedder).cue_vectors == 0
    local.close()


def test_push_and_pull_carry_the_vectors_the_other_side_has_without_the_model(
        tmp_path, hub_url, hub_space, embedder):
    local, _, fact = local_atlas(tmp_path / "memory.db")
    assert fill_cue_vectors(local, embedder) == 1  # the local file's own, as its service does
    blob = local.cue_vectors([fact])[fact]
    settings = _settings(tmp_path, hub_url)
    assert hub_sync.push(settings, local, hub_space.space).cue_vectors == 1
    assert hub_space.cue_vectors([fact]) == {fact: blob} and hub_space.cue_vectors_due(9) == []
    assert hub_sync.push(settings, local, hub_space.space).cue_vectors == 0  # has them
    other = Store(tmp_path / "other.db")
    assert hub_sync.pull(settings, other, hub_space.space).cue_vectors == 1
    assert other.cue_vectors([fact]) == {fact: blob} and other.cue_vectors_due(9) == []
    local.close()
    other.close()


def test_share_and_unshare_carry_a_note_s_cue_vectors_both_ways(tmp_path, hub_url, hub_space,
                                                                  embedder):
    from lore_plugin.maintenance.share_moves import share, unshare

    local, _, fact = local_atlas(tmp_path / "memory.db")
    assert fill_cue_vectors(local, embedder) == 1
    blob = local.cue_vectors([fact])[fact]
    settings = _settings(tmp_path, hub_url)
    share(settings, local, fact, hub_space.space, None)
    assert not local.has_fragment(fact) and local.cue_vectors([fact]) == {}
    assert hub_space.cue_vectors([fact]) == {fact: blob} and hub_space.cue_vectors_due(9) == []
    unshare(settings, local, fact, hub_space.space, None)
    assert local.cue_vectors([fact]) == {fact: blob} and local.cue_vectors_due(9) == []
    local.close()


def test_vectors_of_cues_the_copy_changed_stay_behind(tmp_path, hub_url, hub_space, embedder):
    local, _, fact = local_atlas(tmp_path / "memory.db")
    raw = f"login with {SECRET}\nstaging login"  # as an older Lore could have kept them
    local.conn.execute("UPDATE fragments SET cues = ? WHERE id = ?", (raw, fact))
    assert fill_cue_vectors(local, embedder) == 1 and local.cue_vectors([fact])
    done = hub_sync.push(_settings(tmp_path, hub_url), local, hub_space.space)
    assert (done.fragments, done.cue_vectors) == (2, 0)
    kept = hub_space.get(fact).cues
    assert SECRET not in kept and "staging login" in kept  # the hub redacted them
    assert hub_space.cue_vectors([fact]) == {} and hub_space.cue_vectors_due(9) == [(fact, kept)]
    local.close()


def test_a_push_without_the_model_leaves_the_cues_due(tmp_path, hub_url, hub_space):
    local, _, fact = local_atlas(tmp_path / "memory.db")
    assert hub_sync.push(_settings(tmp_path, hub_url), local, hub_space.space).cue_vectors == 0
    assert hub_space.cue_vectors_due(10) == [(fact, CUES)]
    local.close()


class _BrokenModel:
    def embed(self, texts: list[str]):
        raise RuntimeError("the model file is corrupt")


def test_a_failing_model_is_one_log_line_and_the_notes_stay_due(hub_space, caplog):
    fid = hub_space.insert(NewFragment(content="x", summary="x", depth=2, cues=CUES), 1.0)
    assert fill_after_write(hub_space, _BrokenModel(), "the test space") == 0  # type: ignore[arg-type]
    assert "left due: the model file is corrupt" in caplog.text
    assert hub_space.cue_vectors_due(10) == [(fid, CUES)]


def test_the_ingestion_worker_fills_the_hub_spaces_it_wrote(tmp_path, hub_url, hub_space,
                                                          embedder):
    routes = Routes(_settings(tmp_path, hub_url, hub_space.space), embedder, time.time)
    local = None
    try:
        from lore_plugin.recall.memory import Memory

        local = Memory(tmp_path / "memory.db", embedder)
        written = routes.memory(hub_space.space, local)  # as a routed transcript's batch
        topic = written.store("Atlas", "Atlas", depth=0).id
        fid = written.store("To run atlas use make dev", "Running atlas", topic, depth=1,
                            cues=CUES).id
        more = [written.store(f"note {n}", f"Note {n}", topic, depth=1, cues=f"phrase {n}").id
                for n in range(2)]
        assert len(hub_space.cue_vectors_due(10)) == 3
        assert routes.fill_cue_vectors(most=2) == 2  # a backlog is filled a share at a time
        assert routes.fill_cue_vectors() == 1
        assert set(hub_space.cue_vectors([fid, *more])) == {fid, *more}
    finally:
        routes.close()
        if local is not None:
            local.close()


def test_a_hub_space_s_consolidation_fills_what_is_due(tmp_path, hub_url, hub_space, embedder,
                                                      clock):
    fid = hub_space.insert(NewFragment(content="To run atlas use make dev",
                                       summary="Running atlas", depth=2, cues=CUES), clock())
    outcome = run_hub_if_overdue(_settings(tmp_path, hub_url, hub_space.space), clock,
                                 force=True, make_llm=_no_llm, make_embedder=lambda s: embedder)
    # The cycle's own fill (consolidation/llm_round.py), now that a hub space offers DueCues.
    assert outcome[hub_space.space]["phases"]["cue_vectors"]["notes"] == 1  # type: ignore[index]
    assert list(hub_space.cue_vectors([fid])) == [fid]


def test_the_service_storing_into_a_hub_space_fills_its_cues_after_the_answer(
        tmp_path, hub_url, hub_space, embedder):
    from lore_plugin.recall.memory import Memory
    from lore_plugin.service import answers, spaced
    from lore_plugin.service.engine import Service

    service = Service(Memory(tmp_path / "memory.db", embedder))
    try:
        spaced.attach(service, _settings(tmp_path, hub_url, hub_space.space))
        answers.store_memory(service, "Atlas", "Atlas", depth=0)
        plain = hub_space.find_by_summary("Atlas")
        assert plain is not None and hub_space.cue_vectors_due(10) == []  # no cues: nothing
        answers.store_memory(service, "To run atlas use make dev", "Running atlas", plain,
                             depth=1, cues=CUES.splitlines())
        fid = hub_space.find_by_summary("Running atlas")
        deadline = time.monotonic() + 20
        while not hub_space.cue_vectors([fid]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert decode(hub_space.cue_vectors([fid])[fid]).shape == (2, 384)
    finally:
        service.close()


def test_lore_hub_push_embeds_the_cues_the_local_file_has_no_vectors_for(tmp_path, hub_url):
    from tests.cli.test_hub_cli import fresh_database, lore

    home = tmp_path / "laptop"
    home.mkdir()
    local, _, fact = local_atlas(home / "memory.db")  # due locally: no service has filled them
    local.close()
    url = fresh_database(hub_url)
    assert lore(home, "hub", "init", url).returncode == 0
    pushed = lore(home, "hub", "push", "--space", "personal", "--yes", LORE_HUB_URL=url)
    assert "cue vectors for 1 notes" in pushed.stdout, pushed.stderr
    space = HubStore(url, "personal")
    try:
        assert decode(space.cue_vectors([fact])[fact]).shape == (2, 384)
    finally:
        space.close()
