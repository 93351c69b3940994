"""The brief's team part (issue 29): a teammate's knowledge with its author, and only what
may be trusted: agent-stored or inferred knowledge waits for someone to confirm it. The
memory service reads it (service/spaces_brief.py); a team space it cannot reach is named."""

from __future__ import annotations

from lore_plugin.core.config import Settings
from lore_plugin.core.types import NewFragment
from lore_plugin.hooks.brief_spaces import _part
from lore_plugin.recall.brief_items import team_lines
from lore_plugin.service.spaces_brief import SpacesBrief
from tests.team_api import make_repo

PROJECT = "github.com/acme/platform-api"


def add(store, summary: str, source: str, basis: str | None, confirmed: float | None = None
        ) -> str:
    return store.insert(NewFragment(content=summary, summary=summary, depth=2, importance=0.9,
                                    project=PROJECT, source=source, basis=basis,
                                    confirmed_at=confirmed), 1.0)


def test_agent_stored_or_inferred_team_knowledge_waits_for_a_confirmation(hub_space):
    add(hub_space, "Stated: handlers return problem+json", "user", "stated")
    add(hub_space, "Agent: retries use exponential backoff", "agent", None)
    add(hub_space, "Inferred: the cache lives for an hour", "assistant", "inferred")
    add(hub_space, "Confirmed agent note: deploys need a tag", "agent", None, confirmed=2.0)
    lines = team_lines(hub_space, hub_space.space, PROJECT)
    text = "\n".join(lines)
    assert lines[0] == f"From the team space {hub_space.space}:"
    assert "Stated: handlers return problem+json" in text
    assert "Confirmed agent note: deploys need a tag" in text
    assert "Agent: retries" not in text and "Inferred: the cache" not in text
    assert "(from: postgres, stated)" in text  # the author the database stamped
    assert "(from: postgres, agent-stored, confirmed)" in text


def test_the_service_reads_the_repositorys_team_space_for_the_brief(tmp_path, hub_url,
                                                                    hub_space):
    add(hub_space, "Stated: handlers return problem+json", "user", "stated")
    repo = make_repo(tmp_path / "repo", space=hub_space.space)
    brief = SpacesBrief(Settings(db_path=tmp_path / "memory.db", home=tmp_path, hub_url=hub_url,
                                 hub_space="local"))
    try:
        answer = brief.answer(str(repo), wait=20)
    finally:
        brief.close()
    team = _part(answer).team
    assert team[0] == f"From the team space {hub_space.space}:"
    assert "handlers return problem+json" in team[1] and "(from: postgres, stated)" in team[1]


def test_a_repository_that_shares_nothing_adds_nothing_and_a_down_hub_is_named(tmp_path,
                                                                              hub_url):
    plain = SpacesBrief(Settings(db_path=tmp_path / "memory.db", home=tmp_path,
                                 hub_url=hub_url, hub_space="local"))
    assert _part(plain.answer(str(make_repo(tmp_path / "plain")), wait=5)).team == []
    plain.close()
    repo = make_repo(tmp_path / "repo", space="platform")
    down = SpacesBrief(Settings(db_path=tmp_path / "memory.db", home=tmp_path,
                                hub_url=hub_url.split("?")[0] + f"?host={tmp_path / 'nothing'}",
                                hub_space="local"))
    (line,) = _part(down.answer(str(repo), wait=5)).team
    down.close()
    assert line.startswith("Team space platform not reached")
