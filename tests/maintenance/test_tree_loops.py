"""A damaged tree, as an old import or a hand edit could leave it (a loop A→B→C→A, a loop of
versions, a chain of fragments with two parents each): doctor finds and repairs it, and every
walk of the tree ends and counts each fragment once."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lore_plugin.core.config import Settings
from lore_plugin.maintenance.markdown import export_markdown
from lore_plugin.maintenance.operations import doctor, forget
from lore_plugin.recall import render
from lore_plugin.store import Store
from tests.conftest import python_env
from tests.recall.test_memory import tree


@pytest.fixture()
def settings(tmp_path, db_path) -> Settings:
    return Settings(db_path=db_path, home=tmp_path / "home")


def looped(memory, clock) -> dict[str, str]:
    """tree(), with the Dashboard branch closed into a loop: ui → react → css → ui."""
    ids = tree(memory)
    memory.writer.link(ids["css"], ids["ui"], "hierarchical", 1.0, clock())
    return ids


def test_doctor_finds_a_loop_in_the_hierarchy_and_among_versions_and_repairs_both(
        memory, settings, clock):
    ids = looped(memory, clock)
    memory.writer.supersede(ids["vacuum"], ids["pool"], clock())
    memory.writer.supersede(ids["pool"], ids["vacuum"], clock())
    graph = next(f for f in doctor(settings) if f.check == "graph")
    assert not graph.ok
    assert graph.detail.endswith("0 second parents, 1 loops in the hierarchy, 1 loops of "
                                 "versions")
    fixed = next(f for f in doctor(settings, fix=True) if f.check == "graph")
    assert fixed.fixed
    assert all(f.ok for f in doctor(settings))
    store = memory.reader
    assert store.parent_id(ids["ui"]) is None  # the edge back up to the topic went
    assert store.ancestors(ids["css"]) == [ids["react"], ids["ui"]]
    versions = store.get_many([ids["pool"], ids["vacuum"]], with_parent=False)
    assert sorted(f.superseded_by is None for f in versions.values()) == [False, True]


def test_the_markdown_mirror_of_a_looped_tree_is_whole_and_leaves_no_temp_file(
        memory, settings, clock, tmp_path):
    ids = looped(memory, clock)
    out = tmp_path / "mirror"
    assert export_markdown(settings, out) == 2
    assert sorted(p.suffix for p in out.iterdir()) == [".md", ".md"]
    dashboard = next(out.glob("Dashboard-frontend-*.md")).read_text()
    assert dashboard.count("Tailwind only, no CSS-in-JS") == 1
    assert f"({ids['ui'][:12]}," not in dashboard  # the topic is no bullet of its own


def test_forget_with_cascade_deletes_a_looped_subtree(memory, settings, clock):
    ids = looped(memory, clock)
    gone = forget(settings, ids["ui"], cascade=True, now=clock())
    assert sorted(gone) == sorted([ids["ui"], ids["react"], ids["css"]])
    store = Store(settings.db_path)
    assert store.count_fragments() == 5 and store.orphan_edges() == []


def test_topic_sizes_and_walks_count_each_fragment_of_a_loop_once(memory, clock):
    ids = looped(memory, clock)
    sizes = {t.fragment.id: t.fragment_count for t in memory.topics()}
    assert sizes == {ids["ui"]: 2, ids["db"]: 4}
    assert "Dashboard frontend — 2 fragments," in render.topics_text(memory.topics())
    store = memory.reader
    assert store.ancestors(ids["css"]) == [ids["react"], ids["ui"]]
    assert store.descendant_ids(ids["ui"]) == [(ids["react"], 1), (ids["css"], 2)]
    assert store.descendants_at_depth([ids["ui"]], 2) == [(ids["ui"], ids["css"])]
    below = memory.subtree(ids["ui"], max_depth=8)
    assert [c.fragment.id for c in below.children] == [ids["react"]]
    assert [c.fragment.id for c in below.children[0].children] == [ids["css"]]
    assert below.children[0].children[0].children == ()


WALKS = """
import sys
from lore_plugin.store import Store
store = Store(sys.argv[1])
print(len(store.ancestors(sys.argv[3])), store.descendant_counts([sys.argv[2]])[sys.argv[2]],
      len(store.descendant_ids(sys.argv[2])), len(store.descendants_at_depth([sys.argv[2]], 12)))
"""


def test_a_chain_of_fragments_with_two_parents_each_is_walked_in_bounded_time(settings):
    """40 levels of two fragments, each a child of both above it: 2^40 paths, 80 fragments.
    A walk that followed every path (ancestors went 32 levels up) never ended."""
    store = Store(settings.db_path)
    level = [[f"{k:02d}{side}" * 16 for side in "ab"] for k in range(41)]
    with store.write():
        for k, pair in enumerate(level):
            for fid in pair:
                store.execute("INSERT INTO fragments (id, content, summary, depth, created_at, "
                              "last_accessed, last_reinforced) VALUES (?, 'x', 'x', ?, 0, 0, 0)",
                              (fid, k))
                for parent in level[k - 1] if k else []:
                    store.execute("INSERT INTO edges VALUES (?, ?, ?, 'hierarchical', 1, 0)",
                                  (parent[:16] + fid[:16], parent, fid))
    store.close()
    out = subprocess.run([sys.executable, "-c", WALKS, str(settings.db_path), level[0][0],
                          level[40][0]], env=python_env(), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    # 32 levels up, 16 down (two fragments each); 12 levels down holds the pair at depth 12
    assert out.stdout.split() == ["64", "32", "32", "2"]


def test_doctor_finds_a_second_parent_and_keeps_the_newest(memory, settings, clock):
    """Linking moves a child, so only an old import could give one two parents; a walk then
    reaches it twice, and a chain of them (the test above) made walks explode."""
    ids = tree(memory)
    memory.writer.execute("INSERT INTO edges VALUES (?, ?, ?, 'hierarchical', 1.0, ?)",
                          ("e" * 32, ids["react"], ids["pool"], clock() + 1))
    graph = next(f for f in doctor(settings) if f.check == "graph")
    assert not graph.ok and "1 second parents" in graph.detail
    assert next(f for f in doctor(settings, fix=True) if f.check == "graph").fixed
    assert all(f.ok for f in doctor(settings))
    assert memory.reader.parent_id(ids["pool"]) == ids["react"]
    assert {t.fragment.id: t.fragment_count for t in memory.topics()} == {ids["db"]: 3,
                                                                          ids["ui"]: 3}
