"""What an opted-in repository shares with its team space, decided per fact from the
extractor's own fields, through real ingestion: transcripts on disk, the anthropic SDK
talking to a fake API, the real embedding model, a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

import pytest

from lore_plugin.capture.ingest import Ingestor
from lore_plugin.core.config import Settings
from lore_plugin.hub import HubStore
from lore_plugin.llm.client import pick_llm
from lore_plugin.store import Store
from tests.fake_anthropic import FakeAnthropic
from tests.team_api import TeamModel, as_role, make_repo, make_roles, stored
from tests.transcripts import TranscriptWriter

RULES = {
    "stated/project: Platform API handlers return problem+json errors": "team",
    "observed/project: Platform API tests need docker compose up first": "team",
    "inferred/project: Platform API probably caches tokens for an hour": "local",
    "stated/personal: I prefer tabs over spaces in my editor": "local",
    "stated/other: The billing service deploys on Fridays only": "local",
    "stated/general: Python dicts keep insertion order": "local",
    "stated/unsaid: The release branch is cut every Monday": "local",
}
SECRET = "stated/project: Platform API staging uses password=hunter2hunter2 for the admin"


@pytest.fixture()
def team(hub_space):
    return hub_space.space


@pytest.fixture()
def run(tmp_path, hub_url, embedder, clock):
    """Ingests one session's transcript in `repo` with a hub whose default space is local;
    returns (local facts, team facts)."""
    model = TeamModel()
    with FakeAnthropic(model) as api:
        def ingest(repo, lines, config: dict | None = None, folder=tmp_path):
            values = {"hub_url": hub_url, **(config or {})}
            folder.mkdir(parents=True, exist_ok=True)
            settings = Settings(db_path=folder / "memory.db", home=folder / "home",
                                hub_space="local", retry_backoff_secs=0.0,
                                max_requests_per_hour=10_000, **values)
            llm = pick_llm(settings, env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": api.url})
            writer = TranscriptWriter(folder / "t.jsonl", cwd=str(repo))
            for line in lines:
                writer.user(f"Note this. {line}.")
                writer.assistant("Noted.", tool=False)
            ingestor = Ingestor(settings, llm, embedder, clock)
            try:
                report = ingestor.ingest(writer.path)
            finally:
                ingestor.close()
            store = Store(settings.db_path)
            try:
                local = stored(list(store.export_fragments()))
            finally:
                store.close()
            return report, local, writer
        yield ingest


def team_facts(hub_url: str, space: str) -> dict[str, dict]:
    store = HubStore(hub_url, space)
    try:
        return stored(list(store.export_fragments()))
    finally:
        store.close()


def test_each_rule_decides_where_a_fact_goes(tmp_path, run, team, hub_url):
    repo = make_repo(tmp_path / "repo", space=team)
    report, local, _ = run(repo, list(RULES))
    shared = team_facts(hub_url, team)
    assert report.failed is None and report.skipped is None
    for line, where in RULES.items():
        summary = line.split(": ", 1)[1]
        assert (summary in shared) == (where == "team"), line
        assert (summary in local) == (where == "local"), line  # never both, never lost
    fact = shared["Platform API handlers return problem+json errors"]
    assert fact["project"] == "github.com/acme/platform-api"
    assert fact["basis"] == "stated" and fact["metadata"]["author"]


def test_anything_redaction_touched_stays_local(tmp_path, run, team, hub_url):
    repo = make_repo(tmp_path / "repo", space=team)
    _, local, _ = run(repo, [SECRET])
    assert team_facts(hub_url, team) == {}
    (kept,) = local
    assert "[REDACTED:" in kept and "hunter2" not in kept


def test_a_repository_without_lore_toml_shares_nothing(tmp_path, run, team, hub_url):
    repo = make_repo(tmp_path / "repo")
    _, local, _ = run(repo, list(RULES))
    assert team_facts(hub_url, team) == {}
    assert len(local) == len(RULES)


def test_a_member_can_opt_out_of_a_repository_for_themselves(tmp_path, run, team, hub_url):
    repo = make_repo(tmp_path / "repo", space=team)
    _, local, _ = run(repo, list(RULES),
                      {"share_overrides": (("github.com/acme/*", ""),)})
    assert team_facts(hub_url, team) == {}
    assert len(local) == len(RULES)


def test_a_team_space_that_is_down_leaves_the_slice_waiting(tmp_path, run, team, hub_url):
    repo = make_repo(tmp_path / "repo", space=team)
    down = hub_url.split("?")[0] + f"?host={tmp_path / 'no-server-here'}"
    report, local, writer = run(repo, list(RULES), {"hub_url": down})
    assert local == {} and f"team space {team} not reached" in (report.skipped or "")
    store = Store(tmp_path / "memory.db")
    try:
        assert store.watermark(str(writer.path)) == 0  # nothing moved: nothing lost
    finally:
        store.close()
    report, local, _ = run(repo, list(RULES))  # the hub is back: the slice goes through
    assert report.skipped is None and len(local) + len(team_facts(hub_url, team)) == len(RULES)


def test_a_space_that_refuses_the_member_keeps_everything_local(tmp_path, run, hub_url):
    repo = make_repo(tmp_path / "repo", space="no-such-space")
    report, local, _ = run(repo, list(RULES))
    assert report.skipped is None and len(local) == len(RULES)


@pytest.mark.parametrize("named", ["Platform API deploys ride the Tuesday train",
                                   "the Tuesday train"])
def test_a_member_s_correction_supersedes_a_teammate_s_fact_with_both_authors(
        tmp_path, run, hub_url, named):
    """By the id the digest gives the team's fact (its words in the correction then need
    not match: "the Tuesday train" is too far from the fact for a match by words alone)."""
    from lore_plugin.hub.access import Team

    roles = make_roles(hub_url, "alice", "bob")
    space = f"team-{roles['alice'].rsplit('_', 1)[1]}"
    with Team(as_role(hub_url, roles["alice"])) as team:
        team.create(space)
        team.add(roles["bob"], space)
    repo = make_repo(tmp_path / "repo", space=space)
    old = "Platform API deploys ride the Tuesday train"
    new = "Platform API deploys ride the Thursday train"
    run(repo, [f"stated/project: {old}"], {"hub_url": as_role(hub_url, roles["alice"])},
        folder=tmp_path / "alice")
    report, local, _ = run(repo, [f"stated/project: {new}", f"corrects: {named} => {new}"],
                           {"hub_url": as_role(hub_url, roles["bob"])}, folder=tmp_path / "bob")
    assert report.failed is None
    shared = team_facts(hub_url, space)
    assert shared[old]["superseded_by"] == shared[new]["id"]
    assert new not in local  # the new fact went to the team, once
    store = HubStore(hub_url, space)
    try:
        record = store.corrections()
        authors = store.authors([shared[old]["id"], shared[new]["id"]])
    finally:
        store.close()
    assert [(c.old_summary, c.new_summary, c.corrector, c.original_author) for c in record] == [
        (old, new, roles["bob"], roles["alice"])]
    assert authors == {shared[old]["id"]: roles["alice"], shared[new]["id"]: roles["bob"]}
