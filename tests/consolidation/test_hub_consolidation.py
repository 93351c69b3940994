"""Consolidation of hub spaces (issue 28) on the real hub (tests/conftest.py `hub_url`): the
cycle on a hub space does what it does on SQLite, one machine at a time under the advisory
lock, only on spaces the role may write, forgetting only what the role may delete, and a run
killed at any point leaves a consistent space."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lore_plugin.consolidation import cycle as cons
from lore_plugin.consolidation.hub_spaces import run_hub_if_overdue
from lore_plugin.core.config import Settings
from lore_plugin.core.errors import LLMUnavailable
from lore_plugin.hub import HubStore
from lore_plugin.llm.client import FakeLLM
from lore_plugin.store import Store
from tests.conftest import PYTHON, python_env
from tests.consolidation.hub_child import HashEmbedder, answer
from tests.consolidation.test_consolidate import T0, build_graph

DAY = 86400.0


def _space() -> str:
    return f"c{os.urandom(6).hex()}"


def copy_to_hub(template: Path, url: str, space: str) -> HubStore:
    """The SQLite graph, ids kept, into a fresh hub space (what `lore hub push` does)."""
    source = Store(template, readonly=True)
    hub = HubStore(url, space, create_space=True)
    try:
        hub.insert_rows(list(source.export_fragments()), list(source.export_edges()))
    finally:
        source.close()
    return hub


def hub_rows(hub: HubStore, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in hub._all(sql + " WHERE space = %s", (hub.space,))]


def state(rows_of, hub: bool = False) -> dict[str, Any]:
    """What the cycle changes, comparable across backends: fragments with their memory
    state, text and supersession; edges by their ends (associative ones undirected). The
    hub keeps the state in fragment_state (migration 5)."""
    score, fragments = (("s.relevance_score", "fragments JOIN fragment_state s USING (space, id)")
                        if hub else ("relevance_score", "fragments"))
    frags = {r[0]: (r[1], r[2], r[3], round(r[4], 9), r[5]) for r in rows_of(
        f"SELECT id, summary, content, superseded_by, {score}, depth FROM {fragments}")}
    edges = set()
    for source, target, kind, weight in rows_of("SELECT source, target, kind, weight FROM edges"):
        ends = tuple(sorted((source, target))) if kind == "associative" else (source, target)
        edges.add((*ends, kind, round(weight, 9)))
    return {"fragments": frags, "edges": edges}


def check_hub_graph(hub: HubStore) -> None:
    """check_graph's invariants on a hub space (the database's foreign keys hold the rest)."""
    assert hub._all("SELECT target FROM edges WHERE space = %s AND kind = 'hierarchical' "
                    "GROUP BY target HAVING count(*) > 1", (hub.space,)) == []
    assert hub._one("SELECT count(*) FROM fragments f WHERE space = %(s)s AND superseded_by "
                    "IS NOT NULL AND NOT EXISTS (SELECT 1 FROM fragments g WHERE g.space = "
                    "%(s)s AND g.id = f.superseded_by)", {"s": hub.space}) == 0
    frags = {r[0]: (r[1], r[2]) for r in hub_rows(hub, "SELECT id, depth, superseded_by "
                                                      "FROM fragments")}
    parent = {r[0]: r[1] for r in hub._all("SELECT target, source FROM edges WHERE space = %s "
                                           "AND kind = 'hierarchical'", (hub.space,))}
    for fid, (depth, _) in frags.items():
        if depth == 0:
            assert fid not in parent
            continue
        root, hops = fid, 0
        while root in parent and hops < 64:
            root, hops = parent[root], hops + 1
        assert frags[root][0] == 0 and frags[root][1] is None, (fid, root)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("graph") / "template.db"
    build_graph(path)
    return path


def settings_for(tmp_path: Path, url: str, space: str, **kw: Any) -> Settings:
    return Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home", hub_url=url,
                    hub_space=space, **kw)


# -- the same cycle as on SQLite --------------------------------------------------------------
def test_the_cycle_on_a_hub_space_does_what_it_does_on_sqlite(template, hub_url, tmp_path):
    db = tmp_path / "local.db"
    shutil.copy(template, db)
    hub = copy_to_hub(template, hub_url, _space())
    local = Store(db)
    try:
        assert state(local.execute) == state(lambda sql: hub_rows(hub, sql), hub=True)
        reports = []
        for store in (local, hub):  # the second cycle decays what the first one left
            settings = Settings(db_path=db, home=tmp_path)
            runs = []
            for n in range(2):
                now = T0 + n * settings.consolidation_interval_secs
                runs.append(cons.consolidate(settings, store, lambda now=now: now,  # type: ignore[arg-type]
                                             FakeLLM(default=answer), HashEmbedder()))
            reports.append(runs)
        for sqlite_run, hub_run in zip(*reports):
            for key, label in cons_counts():
                assert sqlite_run[key] == hub_run[key], label
            assert sqlite_run["phases"]["merge"]["items"] == hub_run["phases"]["merge"]["items"]
        first = reports[1][0]
        # Every phase had work to do (concept links: see the next test), so the comparison
        # covers each of them.
        for key in ("relevance_updated", "topics_merged", "topic_links",
                    "resummarised", "contradictions", "edges_pruned", "forgotten"):
            assert first[key] > 0, key
        assert first["skipped"] == {"patterns": "this store keeps no failure records"}
        assert state(local.execute) == state(lambda sql: hub_rows(hub, sql), hub=True)
        check_hub_graph(hub)
        # Each merge and supersession is journaled, undoable as on SQLite; in a team space
        # the database also journals every deletion (hub/forget_sql.py).
        journaled = "SELECT action, count(*) FROM curation_journal{} GROUP BY action"
        on_hub = dict(hub._all(journaled.format(" WHERE space = %s"), (hub.space,)))
        assert on_hub.pop("delete") == sum(r["forgotten"] for r in reports[1])
        assert on_hub == dict(local.execute(journaled.format("")))
        assert hub.last_consolidation()["report"]["forgotten"] == reports[1][1]["forgotten"]
    finally:
        local.close()
        hub.close()


def cons_counts() -> list[tuple[str, str]]:
    from lore_plugin.consolidation.schedule import COUNTS

    return [c for c in COUNTS if c[0] != "patterns"] + [("children_moved", "moved"),
                                                         ("edges_decayed", "decayed")]


def test_concepts_of_similar_topics_get_linked_on_a_hub_space_with_the_real_model(
        hub_space, embedder, clock, tmp_path):
    from lore_plugin.recall.memory import Memory
    from tests.consolidation.test_consolidate import topic

    memory = Memory(hub_space, embedder, clock=clock)  # type: ignore[arg-type]
    deploy = topic(memory, "Kubernetes deployment", {
        "rolling update strategy": [], "readiness probes": [], "pod resource limits": []})
    helm = topic(memory, "Kubernetes Helm deployments", {
        "rolling upgrades with helm": [], "helm chart values": [], "chart repositories": []})
    older = topic(memory, "Rust async programming", {"tokio runtime": ["spawn needs Send"]})
    clock.advance(days=3)
    newer = topic(memory, "Async programming in Rust", {"async traits": []})
    report = cons.consolidate(Settings(db_path=tmp_path / "m.db", home=tmp_path), hub_space,  # type: ignore[arg-type]
                              clock, None, embedder)
    assert report["topics_merged"] == 1 and report["topic_links"] == 1
    assert report["concept_links"] > 0
    assert hub_space.get(newer).superseded_by == older
    assert {(a, b) for a, b, _ in hub_space.associative_of(deploy)} == {(deploy, helm)}
    assert report["phases"]["reembed"]["fragments"] == 1  # "async traits" moved


# -- once at a time, only where the role may write ---------------------------------------------
def slow_llm(seconds: float):
    """Holds the cycle (and so its lock) for a while before the phases start."""
    def make(settings: Settings):
        time.sleep(seconds)
        raise LLMUnavailable("no LLM in this test")
    return make


def small_space(url: str, clock) -> HubStore:
    from lore_plugin.core.types import NewFragment

    hub = HubStore(url, _space(), create_space=True)
    tid = hub.insert(NewFragment("Scratch notes", "Scratch notes", 0), clock())
    for n in range(5):  # forgettable in 61 days: never read, unimportant
        hub.insert(NewFragment(f"note {n}", f"note {n}", 2, importance=0.05), clock(),
                   parent_id=tid)
    return hub


def test_two_machines_at_once_consolidate_a_space_once(hub_url, tmp_path, clock):
    hub = small_space(hub_url, clock)
    clock.advance(days=61)
    settings = settings_for(tmp_path, hub_url, hub.space)
    outcomes: list[dict[str, Any]] = []
    start = threading.Barrier(2)

    def machine(name: str) -> None:
        def open_space(settings: Settings, space: str) -> HubStore:
            store = HubStore(hub_url, space, machine=name)
            start.wait()
            return store
        outcomes.append(run_hub_if_overdue(settings, clock, make_llm=slow_llm(2.0),
                                           make_embedder=lambda s: None,
                                           open_space=open_space))

    threads = [threading.Thread(target=machine, args=(m,)) for m in ("laptop", "desktop")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    results = sorted((o[hub.space] for o in outcomes), key=lambda r: isinstance(r, dict))
    assert results[0] == "locked" and isinstance(results[1], dict)
    assert results[1]["forgotten"] == 5
    assert hub.last_consolidated() == clock()
    # Due again only after the interval, on either machine: the schedule is the space's.
    assert run_hub_if_overdue(settings, clock)[hub.space] == "not due"
    clock.advance(seconds=settings.consolidation_interval_secs)
    assert isinstance(run_hub_if_overdue(settings, clock, make_llm=slow_llm(0))[hub.space],
                      dict)
    hub.close()


def test_a_held_lock_or_a_hub_that_is_down_skips_the_space_and_breaks_nothing(
        hub_url, tmp_path, clock):
    hub = small_space(hub_url, clock)
    clock.advance(days=61)
    settings = settings_for(tmp_path, hub_url, hub.space)
    with hub.advisory_lock("consolidation") as got:
        assert got
        assert run_hub_if_overdue(settings, clock, make_llm=slow_llm(0))[hub.space] == "locked"
    assert hub.count_fragments() == 6 and hub.last_consolidated() is None
    down = settings_for(tmp_path, "postgresql://lore@127.0.0.1:9/lore", "personal")
    outcome = run_hub_if_overdue(down, clock)["personal"]
    assert outcome.startswith("skipped: cannot connect to the hub")
    # The lock went with its holder: the next run takes it.
    assert run_hub_if_overdue(settings, clock, make_llm=slow_llm(0))[hub.space]["forgotten"] == 5
    hub.close()


def test_a_reader_never_consolidates_and_a_member_forgets_only_its_own(hub_url, tmp_path,
                                                                       clock):
    from lore_plugin.core.types import NewFragment
    from tests.hub.team_roles import make_team

    team = make_team(hub_url)
    owner, member = (HubStore(team.urls[k], team.space) for k in ("owner", "member"))
    tid = owner.insert(NewFragment("Team notes", "Team notes", 0), clock())
    mine = owner.insert(NewFragment("the owner's stale note", "x", 2, importance=0.05),
                        clock(), parent_id=tid)
    theirs = member.insert(NewFragment("the member's stale note", "y", 2, importance=0.05),
                           clock(), parent_id=tid)
    clock.advance(days=61)

    def run(kind: str) -> dict[str, Any] | str:  # as that role, on its own machine
        settings = settings_for(tmp_path, team.urls[kind], team.space)
        return run_hub_if_overdue(settings, clock, force=True, make_llm=slow_llm(0),
                                  make_embedder=lambda s: None)[team.space]

    before = state(lambda sql: hub_rows(owner, sql))
    assert run("reader") == "read-only"
    assert state(lambda sql: hub_rows(owner, sql)) == before and owner.last_consolidated() is None
    report = run("member")
    # The owner's note is a candidate the member may not delete: it waits for the owner.
    assert report["forgotten"] == 1 and report["phases"]["forget"]["candidates"] == 2
    assert owner.has_fragment(mine) and not owner.has_fragment(theirs)
    assert run("owner")["forgotten"] == 1 and not owner.has_fragment(mine)
    assert owner.has_fragment(tid)
    owner.close()
    member.close()


# -- a killed run ------------------------------------------------------------------------------
def with_fresh_scores(template: Path, folder: Path) -> Path:
    """The template with every relevance score already what the cycle computes at T0: on a
    hub each rewritten score costs an HNSW insert (hub/upkeep.py), and phase 0 would take up
    the whole run; this way a kill lands in the merges, the LLM phases, decay or forgetting."""
    from lore_plugin.core import relevance as rel

    db = folder / "fresh.db"
    shutil.copy(template, db)
    store = Store(db)
    rows = store.execute("SELECT id, importance, access_count, decay_rate, last_reinforced "
                         "FROM fragments")
    with store.write():
        for fid, importance, count, decay, reinforced in rows:
            store.execute("UPDATE fragments SET relevance_score = ? WHERE id = ?",
                          (rel.relevance(importance, count, decay, reinforced, T0), fid))
    store.close()
    return db


def child(url: str, space: str) -> subprocess.Popen:
    proc = subprocess.Popen([PYTHON, "-m", "tests.consolidation.hub_child", url, space,
                             str(T0)], stdout=subprocess.PIPE, env=python_env(),
                            cwd=Path(__file__).parents[2])
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


def test_a_hub_run_killed_at_random_points_leaves_a_consistent_space(template, hub_url,
                                                                      tmp_path):
    fresh = with_fresh_scores(template, tmp_path)
    hub = copy_to_hub(fresh, hub_url, _space())
    proc = child(hub_url, hub.space)
    duration = float(proc.stdout.readline().split()[1])  # type: ignore[union-attr]
    proc.wait()
    check_hub_graph(hub)
    merged = ("SELECT count(*) FROM fragments WHERE space = %s AND depth = 0 AND "
              "superseded_by IS NOT NULL")
    assert hub._one(merged, (hub.space,)) == 10  # every duplicate merged
    hub.close()
    rng = random.Random(20261126)
    settings = Settings(db_path=tmp_path / "m.db", home=tmp_path)
    for _ in range(2):
        hub = copy_to_hub(fresh, hub_url, _space())
        proc = child(hub_url, hub.space)
        time.sleep(rng.uniform(0.1, duration))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        check_hub_graph(hub)
        # The next run carries on from wherever the last one died.
        cons.consolidate(settings, hub, lambda: T0, FakeLLM(default=answer),  # type: ignore[arg-type]
                         HashEmbedder())
        check_hub_graph(hub)
        assert hub._one(merged, (hub.space,)) == 10
        hub.close()


def test_lore_consolidate_runs_the_hub_spaces_after_the_local_file(hub_url, isolated_home,
                                                                    monkeypatch, capsys):
    from lore_plugin.cli.main import main as cli_main

    hub = small_space(hub_url, time.time)
    Store(isolated_home / "memory.db").close()
    monkeypatch.setenv("LORE_HUB_URL", hub_url)
    monkeypatch.setenv("LORE_HUB_SPACE", hub.space)
    assert cli_main(["consolidate"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("consolidated in")
    assert f"hub space {hub.space}: consolidated in" in out and "forgotten 0" in out
    assert hub.last_consolidated() is not None
    assert cli_main(["consolidate"]) == 0
    assert f"hub space {hub.space}: not due" in capsys.readouterr().out
    hub.close()


def test_the_session_start_sweep_consolidates_an_overdue_hub_space(hub_url, tmp_path, clock):
    from lore_plugin.worker.run import Worker

    hub = small_space(hub_url, clock)
    clock.advance(days=61)
    settings = settings_for(tmp_path, hub_url, hub.space)
    Store(settings.db_path).close()
    projects = tmp_path / "projects"
    projects.mkdir()
    Worker(settings, clock).sweep(projects)
    assert hub.last_consolidated() == clock() and hub.count_fragments() == 1
    hub.close()


def test_lore_consolidate_dry_run_previews_the_hub_spaces_and_changes_nothing(
        hub_url, isolated_home, monkeypatch, capsys):
    from lore_plugin.cli.main import main as cli_main
    from lore_plugin.core.types import NewFragment
    from lore_plugin.hub import read_only_url

    hub = small_space(hub_url, lambda: time.time() - 90 * DAY)  # old, never read: forgettable
    Store(isolated_home / "memory.db").close()
    monkeypatch.setenv("LORE_HUB_URL", hub_url)
    monkeypatch.setenv("LORE_HUB_SPACE", hub.space)

    def everything() -> Any:
        return (state(lambda sql: hub_rows(hub, sql), hub=True),
                hub_rows(hub, "SELECT key, value FROM meta"))

    before = everything()
    assert cli_main(["consolidate", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"hub space {hub.space}:\n  dry run (nothing changed)" in out
    assert "5 fragments would be forgotten" in out
    assert everything() == before and hub.last_consolidated() is None
    # The preview's connection cannot write, whatever it calls: the server refuses.
    preview = HubStore(read_only_url(hub_url), hub.space)
    try:
        with pytest.raises(Exception) as refused:
            preview.insert(NewFragment("x", "x", 0), time.time())
        assert "read-only" in str(refused.value), refused.value
    finally:
        preview.close()
    assert everything() == before
    hub.close()
