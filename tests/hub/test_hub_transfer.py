"""Bulk copy into a space keeping ids (push and pull), and the advisory lock that lets one
machine at a time consolidate a space."""

from __future__ import annotations

from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.embedder import to_blob
from lore_plugin.hub import HubStore
from lore_plugin.store import Store

SECRET = "ghp_" + "A1b2C3d4E5" * 4


def _local(tmp_path, embedder) -> Store:
    store = Store(tmp_path / "local.db")
    topic = store.insert(NewFragment(content="Deploys", summary="Deploys", depth=0), 1.0)
    texts = ["deploys go through ArgoCD", f"the deploy token is {SECRET}"]
    for text, vector in zip(texts, embedder.embed(texts)):
        store.insert(NewFragment(content=text, summary=text, depth=1), 2.0,
                     embedding=to_blob(vector), parent_id=topic)
    return store


def test_a_push_keeps_ids_redacts_and_a_second_push_adds_nothing(tmp_path, embedder, hub_space):
    local = _local(tmp_path, embedder)
    rows, edges = list(local.export_fragments()), list(local.export_edges())
    rows[2]["content"] = rows[2]["summary"] = f"the deploy token is {SECRET}"  # as if unredacted
    assert hub_space.insert_rows(rows, edges) == (3, 2)
    assert hub_space.insert_rows(rows, edges) == (0, 0)
    assert sorted(f["id"] for f in hub_space.export_fragments()) == sorted(r["id"] for r in rows)
    pushed = hub_space.get(rows[2]["id"])
    assert SECRET not in pushed.content and pushed.parent_id == rows[0]["id"]
    assert hub_space.embedding_of(rows[1]["id"]) == rows[1]["embedding"]  # vectors exact
    query = embedder.embed(["how do we deploy"])[0]
    assert hub_space.vector_search(query, 1)[0][0] == rows[1]["id"]
    local.close()


def test_pulled_rows_go_back_into_sqlite_unchanged(tmp_path, embedder, hub_space):
    local = _local(tmp_path, embedder)
    hub_space.insert_rows(list(local.export_fragments()), list(local.export_edges()))
    other = Store(tmp_path / "other.db")
    other.import_rows(list(hub_space.export_fragments()), list(hub_space.export_edges()), [])
    mine = {f["id"]: f for f in local.export_fragments()}
    theirs = {f["id"]: f for f in other.export_fragments()}
    assert mine.keys() == theirs.keys()
    for fid, row in mine.items():
        assert {k: v for k, v in theirs[fid].items() if k != "source"} == {
            k: v for k, v in row.items() if k != "source"}
    local.close()
    other.close()


def test_one_machine_at_a_time_holds_a_space_s_consolidation_lock(hub_space, hub_url):
    other = HubStore(hub_url, hub_space.space, machine="laptop")
    try:
        with hub_space.advisory_lock("consolidation") as mine:
            with other.advisory_lock("consolidation") as theirs:
                assert mine and not theirs
            with other.advisory_lock("another job") as unrelated:
                assert unrelated
        with other.advisory_lock("consolidation") as theirs:
            assert theirs  # released when the holder's block ended
    finally:
        other.close()
