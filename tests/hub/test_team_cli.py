"""`lore team` as a real subprocess, each role with its own LORE_HUB_URL: the owner creates a
space and manages its members; every bad input (an invalid name, an unknown space, a role that
does not exist, a non-owner changing members, removing a non-member) is one line on stderr and
a non-zero exit, and changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

from tests.hub.team_roles import make_roles

ROOT = Path(__file__).resolve().parents[2]


def _url(hub_url: str, role: str) -> str:
    socket_dir = conninfo_to_dict(hub_url)["host"]
    return f"postgresql://{role}@/postgres?host={socket_dir}"


def lore(hub_url: str, role: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LORE_HUB_URL": _url(hub_url, role), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "lore_plugin.cli", "team", *args], env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def _members(hub_url: str, space: str) -> set[tuple[str, str]]:
    with psycopg.connect(hub_url) as su:
        return {(r, lvl) for r, lvl in su.execute(
            "SELECT role::text, level FROM space_members WHERE space = %s", (space,))}


def test_lore_team_manages_members_and_refuses_bad_input_in_one_line(hub_url: str) -> None:
    roles, _ = make_roles(hub_url, "owner", "member", "outsider")
    owner, member, outsider = roles["owner"], roles["member"], roles["outsider"]
    space = f"cli-{owner.rsplit('_', 1)[1]}"

    made = lore(hub_url, owner, "create", space)
    added = lore(hub_url, owner, "add", member, "--space", space, "--read-only")
    listed = lore(hub_url, member, "list", "--space", space)
    assert made.returncode == added.returncode == listed.returncode == 0, made.stderr
    assert f"owned by {owner}" in made.stdout and "as reader" in added.stdout
    assert owner in listed.stdout and f"{member}" in listed.stdout and "reader" in listed.stdout
    before = _members(hub_url, space)

    refusals = {
        "invalid space name": lore(hub_url, owner, "create", "Not A Name!"),
        "unknown space": lore(hub_url, owner, "add", member, "--space", "no-such-space"),
        "no such role": lore(hub_url, owner, "add", "nobody_here", "--space", space),
        "invalid role name": lore(hub_url, owner, "add", "Robert'); DROP", "--space", space),
        "not an owner": lore(hub_url, member, "add", outsider, "--space", space),
        "outsider removes": lore(hub_url, outsider, "remove", member, "--space", space),
        "not a member": lore(hub_url, owner, "remove", outsider, "--space", space),
        "the creator": lore(hub_url, owner, "remove", owner, "--space", space),
    }
    for why, run in refusals.items():
        lines = (run.stdout + run.stderr).strip().splitlines()
        assert run.returncode == 1, (why, run.stdout, run.stderr)
        assert len(lines) == 1 and "Traceback" not in run.stderr, (why, lines)
    assert "not an owner" in refusals["not an owner"].stderr
    assert "does not exist" in refusals["no such role"].stderr
    assert _members(hub_url, space) == before

    removed = lore(hub_url, owner, "remove", member, "--space", space)
    assert removed.returncode == 0 and _members(hub_url, space) == {(owner, "owner")}


def test_any_member_lists_a_teammate_s_correction_and_undoes_it_once(hub_url: str) -> None:
    import time

    from lore_plugin.core.types import NewFragment
    from lore_plugin.hub import HubStore
    from tests.hub.team_roles import make_team

    team = make_team(hub_url)
    owner = HubStore(team.urls["owner"], team.space)
    member = HubStore(team.urls["member"], team.space)
    try:
        topic = owner.insert(NewFragment(content="Billing", summary="Billing", depth=0),
                             time.time())
        old = owner.insert(NewFragment(content="Deploys ride Tuesday.", summary="Deploys ride "
                                       "Tuesday", depth=2), time.time(), parent_id=topic)
        new = member.insert(NewFragment(content="Deploys ride Thursday.", summary="Deploys ride "
                                        "Thursday", depth=2), time.time(), parent_id=topic)
        member.supersede(old, new, time.time())
    finally:
        member.close()
        owner.close()
    roles = team.roles

    listed = lore(hub_url, roles["reader"], "corrections", "--space", team.space)
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("#"))
    entry = line[1:].split()[0]
    assert f"{roles['member']} corrected {roles['owner']}'s" in line and "standing" in line
    assert "Deploys ride Tuesday" in line and "Deploys ride Thursday" in line

    refused = {"reader": lore(hub_url, roles["reader"], "undo", entry, "--space", team.space),
               "outsider": lore(hub_url, roles["outsider"], "undo", entry, "--space", team.space)}
    for who, done in refused.items():
        assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, (who, done)
        assert "Traceback" not in done.stderr

    # The owner is the corrected fact's author; any writing member may undo: here the
    # corrector's teammate who neither wrote nor corrected it would do, and so does the owner.
    undone = lore(hub_url, roles["owner"], "undo", entry, "--space", team.space)
    assert undone.returncode == 0, undone.stderr
    assert f"undid {roles['member']}'s correction #{entry}" in undone.stdout
    again = lore(hub_url, roles["member"], "undo", entry, "--space", team.space)
    assert again.returncode != 0 and "undone already" in again.stderr
    store = HubStore(team.urls["owner"], team.space)
    try:
        assert store.get(old).superseded_by is None
    finally:
        store.close()
    after = lore(hub_url, roles["member"], "corrections", "--space", team.space)
    assert f"undone by {roles['owner']}" in after.stdout
