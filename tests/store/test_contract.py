"""The store seam's contract, run against both backends: SQLite (store.Store) and a space of
a real PostgreSQL + pgvector hub (hub.HubStore). The same tests; where a backend cannot do
something the test says so by name (Backend.cannot), never by skipping."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from lore_plugin.core.errors import AmbiguousId, InvalidInput, NotFound
from lore_plugin.core.types import NewFragment
from lore_plugin.recall.memory import Memory
from lore_plugin.store import Store

BACKENDS = ["sqlite", "postgres"]


@dataclass
class Backend:
    name: str
    store: Any

    def cannot(self, backend: str, why: str) -> None:
        """Marks the test an expected failure, by name, on a backend that lacks the feature."""
        if self.name == backend:
            pytest.xfail(f"{backend} cannot: {why}")


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    if request.param == "sqlite":
        store = Store(tmp_path / "m.db")
        yield Backend("sqlite", store)
        store.close()
    else:
        yield Backend("postgres", request.getfixturevalue("hub_space"))


def _frag(text: str, depth: int = 2, **kw: Any) -> NewFragment:
    return NewFragment(content=text, summary=kw.pop("summary", text), depth=depth, **kw)


# -- moved from test_store.py: bookkeeping, edges, the tree, candidate rows -------------------
def test_failures_back_off_and_park_after_repeated_attempts(backend):
    store = backend.store
    for attempt in range(1, 4):
        assert store.record_failure("/t/x.jsonl", 0, 100, "boom", now=1000.0, backoff=60,
                                    park_after=3) == attempt
    failure = store.failure("/t/x.jsonl")
    assert failure["parked"] == 1 and failure["next_retry"] == 1000.0 + 60 * 4
    assert len(store.failures(parked_only=True)) == 1
    assert store.unpark_all(now=2000.0) == 1
    assert store.failure("/t/x.jsonl")["parked"] == 0
    store.clear_failure("/t/x.jsonl")
    assert store.failure("/t/x.jsonl") is None


def test_edges_touching_finds_either_end_of_one_kind_in_one_statement(backend):
    store = backend.store
    a, b, c, d = (store.insert(_frag(x), now=1.0) for x in "abcd")
    store.link(a, b, "temporal", 0.8, 1.0)
    store.link(c, a, "temporal", 0.5, 1.0)
    store.link(a, d, "associative", 0.9, 1.0)
    store.link(c, d, "temporal", 0.7, 1.0)
    found = {(e.source, e.target) for e in store.edges_touching([a], ("temporal",))}
    assert found == {(a, b), (c, a)}
    assert {(e.source, e.target) for e in store.edges_touching([b, d], ("temporal",))} == {(a, b), (c, d)}
    assert store.edges_touching([], ("temporal",)) == []


def _tree(store: Any) -> dict[str, str]:
    """topic > two concepts > facts (one superseded) > a detail, by name."""
    ids: dict[str, str] = {}
    for name, depth, parent in [("topic", 0, None), ("c1", 1, "topic"), ("c2", 1, "topic"),
                                ("f1", 2, "c1"), ("f2", 2, "c1"), ("f3", 2, "c2"),
                                ("d1", 3, "f1")]:
        ids[name] = store.insert(_frag(name, depth), now=1.0,
                                 parent_id=ids[parent] if parent else None)
    store.supersede(ids["f2"], ids["f1"], now=2.0)
    return ids


def test_descendants_at_depth_walks_every_root_to_that_depth_in_one_statement(backend):
    store = backend.store
    ids = _tree(store)
    name = {v: k for k, v in ids.items()}
    found = store.descendants_at_depth([ids["topic"], ids["c2"], ids["f3"]], 2)
    assert sorted((name[r], name[d]) for r, d in found) == [("c2", "f3"), ("topic", "f1"),
                                                          ("topic", "f3")]
    with_old = store.descendants_at_depth([ids["topic"]], 2, include_superseded=True)
    assert sorted(name[d] for _, d in with_old) == ["f1", "f2", "f3"]
    assert [name[d] for _, d in store.descendants_at_depth([ids["c1"]], 3)] == ["d1"]
    assert store.descendants_at_depth([], 2) == []


def test_candidate_rows_can_skip_text_and_parents_and_parents_come_in_one_batch(backend):
    store = backend.store
    ids = _tree(store)
    full = store.get_many([ids["f1"], ids["d1"]])
    assert full[ids["d1"]].parent_id == ids["f1"] and full[ids["d1"]].summary == "d1"
    light = store.get_many([ids["f1"], ids["d1"]], with_text=False, with_parent=False)
    assert light[ids["d1"]].parent_id is None and light[ids["d1"]].summary == ""
    assert light[ids["d1"]].depth == 3 and light[ids["f1"]].created_at == 1.0
    assert store.parent_ids([ids["d1"], ids["f3"], ids["topic"]]) == {
        ids["d1"]: ids["f1"], ids["f3"]: ids["c2"]}


# -- fragments ---------------------------------------------------------------------------------
def test_the_tree_walks_up_and_down_and_counts_live_descendants(backend):
    store = backend.store
    ids = _tree(store)
    name = {v: k for k, v in ids.items()}
    assert [name[i] for i in store.ancestors(ids["d1"])] == ["f1", "c1", "topic"]
    assert [name[i] for i in store.child_ids(ids["c1"])] == ["f1"]
    assert [name[i] for i in store.child_ids(ids["c1"], include_superseded=True)] == ["f1", "f2"]
    assert sorted((name[i], n) for i, n in store.descendant_ids(ids["topic"])) == [
        ("c1", 1), ("c2", 1), ("d1", 3), ("f1", 2), ("f3", 2)]
    assert store.descendant_counts([ids["topic"], ids["c2"]]) == {ids["topic"]: 5, ids["c2"]: 1}
    assert store.topic_ids() == [ids["topic"]] and store.parent_id(ids["topic"]) is None


def test_every_insert_is_redacted_before_it_is_stored(backend):
    secret = "sk-ant-api03-" + "x7Kq2" * 14
    fid = backend.store.insert(_frag(f"the key is {secret}", summary=f"key {secret}"), now=1.0)
    frag = backend.store.get(fid)
    assert secret not in frag.content and secret not in frag.summary
    assert backend.store.keyword_search('"x7kq2x7kq2"', 5) == []


def test_ids_resolve_by_unique_prefix_and_bad_ones_explain_themselves(backend):
    store = backend.store
    a = store.insert(_frag("a", id="abcdef0011223344"), now=1.0)
    store.insert(_frag("b", id="abcdef0099887766"), now=1.0)
    assert store.resolve_id("ABCDEF0011") == a and store.resolve_id(a) == a
    with pytest.raises(AmbiguousId):
        store.resolve_id("abcdef00")
    with pytest.raises(NotFound):
        store.resolve_id("ffffffff")
    with pytest.raises(InvalidInput):
        store.resolve_id("not-an-id!")
    with pytest.raises(NotFound):
        store.get("0" * 32)
    assert store.ids_by_prefix(["abcdef001122", "abcdef00"]) == {"abcdef001122": a}


def test_find_by_summary_ignores_case_superseded_fragments_and_other_parents(backend):
    store = backend.store
    ids = _tree(store)
    assert store.find_by_summary("F1", 2, ids["c1"]) == ids["f1"]
    assert store.find_by_summary("f1", 2, ids["c2"]) is None
    assert store.find_by_summary("f2", 2) is None  # superseded
    assert store.find_by_summary("f3") == ids["f3"]


def test_a_merge_joins_the_victims_cues_to_the_survivors_in_its_transaction(backend):
    store = backend.store
    keep = store.insert(_frag("keep", 0, cues="ship day\nrelease"), now=1.0)
    gone = store.insert(_frag("gone", 0, cues="Release\nwhen do we deploy"), now=2.0)
    plain = store.insert(_frag("plain", 0), now=3.0)
    assert store.merge_topic(gone, keep, 4.0) == 0
    assert store.get(keep).cues == "ship day\nrelease\nwhen do we deploy"
    assert store.get(gone).cues == "Release\nwhen do we deploy"  # kept for an undo
    assert store.merge_topic(plain, keep, 5.0) == 0  # nothing to add: unchanged
    assert store.get(keep).cues == "ship day\nrelease\nwhen do we deploy"
    assert store.merge_topic(gone, keep, 6.0) is None


def test_cue_vectors_are_due_until_filled_and_never_served_for_older_cues(backend, embedder):
    """The seam the per-prompt judge and search read cue vectors through (issue 30): a note
    stored with cues is due; the fill stores its vectors; a change of cues makes it due again
    and its old vectors are not served; cues cleared leave nothing due."""
    from lore_plugin.embedding.cue_vectors import closest
    from lore_plugin.recall.cue_vector_fill import fill_cue_vectors

    store = backend.store
    cued = store.insert(_frag("Recharts draws our charts", cues="charting library"), now=1.0)
    plain = store.insert(_frag("Tabs in Go files"), now=1.0)
    assert store.cue_vectors_due(10) == [(cued, "charting library")]
    assert store.cue_vectors([cued, plain]) == {}
    assert fill_cue_vectors(store, embedder) == 1
    blob = store.cue_vectors([cued, plain])[cued]
    assert closest(embedder.embed(["charting library"])[0], blob) == pytest.approx(1.0, abs=0.01)
    # A fill made from cues that have since changed is refused, and the note stays due.
    store.update_text(cued, cues="graph library\nhow charts are drawn")
    assert store.cue_vectors([cued]) == {}
    assert store.set_cue_vectors([(cued, "charting library", blob)]) == 0
    assert store.cue_vectors_due(10) == [(cued, "graph library\nhow charts are drawn")]
    assert fill_cue_vectors(store, embedder) == 1
    assert len(store.cue_vectors([cued])[cued]) == 2 * (4 + 384)
    store.update_text(cued, cues="")
    assert store.cue_vectors([cued]) == {} and store.cue_vectors_due(10) == []


def test_topics_named_lists_every_live_topic_of_that_name_with_its_project(backend):
    store = backend.store
    atlas = store.insert(_frag("Deploys", 0, project="/work/atlas"), now=1.0)
    lumen = store.insert(_frag("deploys", 0, project="/work/lumen"), now=2.0)
    none = store.insert(_frag("DEPLOYS", 0), now=3.0)
    gone = store.insert(_frag("Deploys", 0, project="/work/old"), now=4.0)
    store.supersede(gone, atlas, now=5.0)
    store.insert(_frag("Deploys", 1, project="/work/atlas"), 6.0, None, atlas)
    assert store.topics_named(" Deploys ") == [
        (atlas, "/work/atlas"), (lumen, "/work/lumen"), (none, None)]
    assert store.topics_named("Releases") == []


def test_topic_names_of_one_project_or_of_none(backend):
    store = backend.store
    store.insert(_frag("Deploys", 0, project="/work/atlas"), now=1.0)
    store.insert(_frag("Styling", 0, project="/work/lumen"), now=2.0)
    store.insert(_frag("Editor", 0), now=3.0)
    store.insert(_frag("Shell", 0, project="/"), now=4.0)  # the file system's root: none
    assert sorted(store.topic_names()) == ["Deploys", "Editor", "Shell", "Styling"]
    assert store.topic_names(project="/work/atlas") == ["Deploys"]
    assert sorted(store.topic_names(project=None)) == ["Editor", "Shell"]
    assert store.topic_names(project="/work/other") == []


def test_deleting_moves_children_up_and_clears_what_pointed_at_it(backend):
    store = backend.store
    ids = _tree(store)
    store.delete(ids["f1"], now=3.0)
    assert store.parent_id(ids["d1"]) == ids["c1"]
    assert store.get(ids["f2"]).superseded_by is None
    with pytest.raises(NotFound):
        store.get(ids["f1"])
    assert store.counts()["fragments"] == 6


def test_text_updates_confirmations_metadata_and_states_are_kept(backend):
    from lore_plugin.core.relevance import MemoryState

    store = backend.store
    fid = store.insert(_frag("we ship on fridays", summary="ship day"), now=1.0)
    store.update_text(fid, summary="ship day is Thursday", content="we ship on Thursdays")
    assert store.confirm([fid], now=5.0) == 1 and store.confirm([fid], now=6.0) == 0
    store.set_metadata(fid, {"review": {"note": 1}})
    store.save_memory_states({fid: (MemoryState(3, 0.01, 7.0, 7.0), 1.5)})
    frag = store.get(fid)
    assert (frag.summary, frag.confirmed_at, frag.metadata) == (
        "ship day is Thursday", 5.0, {"review": {"note": 1}})
    assert (frag.access_count, frag.relevance_score, frag.last_accessed) == (3, 1.5, 7.0)
    assert [f.id for f, _ in store.keyword_search('"thursdays"', 5)] == [fid]
    # ...and the rows of both searches carry the state recall wrote (it blends into ranks)
    assert [(f.access_count, f.relevance_score) for f, _ in store.keyword_search(
        '"thursdays"', 5)] == [(3, 1.5)]
    assert [(f.access_count, f.relevance_score) for f in store.get_many(
        [fid], with_text=False, with_parent=False).values()] == [(3, 1.5)]
    assert store.keyword_search('"fridays"', 5) == []


def test_recall_use_counts_returns_uses_and_runs_of_ignored_recalls(backend):
    store = backend.store
    a, b = (store.insert(_frag(x), now=1.0) for x in ("used once", "never used"))
    store.record_recall_use([a, b], [a], 2.0)
    store.record_recall_use([a, b, b], [], 3.0)  # b shown twice in one recall counts twice
    assert store.recall_use(a) == (2, 1, 1)
    assert store.recall_use(b) == (3, 0, 3)
    store.record_recall_use([b], [b], 4.0)  # a use ends the run of ignored recalls
    assert store.recall_use(b) == (4, 1, 0)
    # the brief's candidates carry the counts (times recalled, times used)
    assert {f.id: (r, u) for f, r, u in store.knowledge_of(None, 10)} == {a: (2, 1), b: (4, 1)}
    store.record_recall_use(["0123456789abcdef" * 2], [], 5.0)  # no such fragment: nothing
    store.record_recall_use([], [], 5.0)
    assert store.recall_use("0123456789abcdef" * 2) == (0, 0, 0)
    store.delete(a, now=6.0)  # the counts go with their fragment
    assert store.recall_use(a) == (0, 0, 0)
    assert store.get(b).access_count == 0  # counting is not reinforcing


# -- keyword search ------------------------------------------------------------------------
def test_keyword_search_ranks_the_rare_word_and_the_summary_first(backend):
    store = backend.store
    for i in range(20):
        store.insert(_frag(f"the gateway logs request {i} from the billing service"), now=1.0)
    rare = store.insert(_frag("the gateway logs ERR_7731 when the pool is exhausted"), now=1.0)
    titled = store.insert(_frag("how retries are configured", summary="billing"), now=1.0)
    found = store.keyword_search('"gateway" OR "err_7731"', 5)
    assert found[0][0].id == rare and found[0][0].summary == ""  # rows come without text
    assert [s for _, s in found] == sorted(s for _, s in found)  # lower is better, as bm25
    assert store.keyword_search('"billing"', 30)[0][0].id == titled
    assert store.keyword_search('"nothing-matches-this"', 5) == []


def test_term_statistics_and_fragment_tokens_agree_on_the_index_s_tokens(backend):
    store = backend.store
    a = store.insert(_frag("releasing the kafka consumer", summary="release notes"), now=1.0)
    store.insert(_frag("released kafka yesterday"), now=1.0)
    rows, terms = store.term_statistics(["releasing", "kafka", "consumer"])
    assert rows == 2
    assert terms["kafka"][1] == 2 and terms["consumer"][1] == 1
    assert terms["releasing"][0] <= store.fragment_tokens([a])[a]  # the same stemmed token


# -- bookkeeping, ledger, journal -----------------------------------------------------------
def test_watermarks_meta_ledger_and_journal_round_trip(backend):
    store = backend.store
    store.set_watermark("/t/a.jsonl", 120, 1.0)
    store.set_watermark("/t/a.jsonl", 240, 2.0)
    assert store.watermark("/t/a.jsonl") == 240 and store.watermarks() == {"/t/a.jsonl": 240}
    store.set_meta("k", "v1")
    store.set_meta("k", "v2")
    assert store.get_meta("k") == "v2" and store.get_meta("missing") is None
    store.record_usage(10.0, "extract", None, "m", 100, 20, 0.01)
    store.record_usage(20.0, "extract", None, "m", 50, 5, None)
    assert store.usage_since(0.0) == [("extract", 2, 150, 25, 0.01)]
    assert store.tokens_since(15.0) == 55
    entry = store.journal_add("edit", "f" * 32, "edited", {"summary": "old"}, 30.0)
    assert store.journal()[0]["undo"] == {"summary": "old"}
    assert store.journal_undone(entry, 31.0) and not store.journal_undone(entry, 32.0)
    assert store.journal_entry(entry)["undone_at"] == 31.0


def test_history_is_recorded_once_and_its_watermarks_start_after_it(backend):
    store = backend.store
    store.set_watermark("/t/known.jsonl", 10, 1.0)
    assert store.record_history([("/t/old.jsonl", 500), ("/t/known.jsonl", 900)], 2.0)
    assert not store.record_history([("/t/other.jsonl", 7)], 3.0)
    assert store.watermark("/t/old.jsonl") == 500 and store.watermark("/t/known.jsonl") == 10
    assert store.history() == [("/t/old.jsonl", 500, 0)] and store.history_recorded()


# -- what the consolidation cycle reads and writes (consolidation/cycle.py) -------------------
def _unit(seed: int) -> bytes:
    import numpy as np

    from lore_plugin.embedding.embedder import to_blob

    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return to_blob(v / np.linalg.norm(v))


def test_relevance_is_read_as_numbers_and_written_back_unless_recall_moved_it(backend):
    store = backend.store
    a = store.insert(_frag("a", importance=0.5), now=10.0)
    b = store.insert(_frag("b", 1, importance=0.9), now=20.0)
    rows = {r[0]: r for r in store.relevance_table()}
    assert len(rows) == 2 and all(isinstance(v, (int, float)) for r in rows.values() for v in r)
    by_rowid = store.ids_by_rowid(list(rows))
    assert sorted(by_rowid.values()) == sorted([a, b])
    rowid = {fid: r for r, fid in by_rowid.items()}
    _, importance, count, decay, reinforced, created, depth, score = rows[rowid[b]]
    assert (importance, count, created, depth) == (0.9, 0, 20.0, 1)
    from lore_plugin.core.relevance import MemoryState

    # Recalled after the cycle read it: keeps the score recall gave it.
    store.save_memory_states({a: (MemoryState(1, 0.5, 30.0, 30.0), 0.9)})
    updated = store.set_relevance_if_unchanged(
        [(0.123, rowid[a], rows[rowid[a]][4], 0), (0.456, rowid[b], reinforced, count)])
    assert updated == 1
    assert store.get(b).relevance_score == 0.456 and store.get(a).relevance_score == 0.9


def test_associative_links_are_undirected_keep_the_larger_weight_and_decay(backend):
    store = backend.store
    a, b, c = (store.insert(_frag(x), now=1.0) for x in "abc")
    assert store.upsert_associative([(a, b, 0.5), (b, a, 0.7), (a, c, 0.2)], 1.0) == 2
    assert store.upsert_associative([(b, a, 0.6), (c, a, 0.9)], 2.0) == 0
    assert store.associative_pairs() == {frozenset((a, b)), frozenset((a, c))}
    assert sorted(w for _, _, w in store.associative_of(a)) == [0.7, 0.9]
    store.link(a, b, "temporal", 0.1, 1.0)
    assert store.edge_decay_preview(0.5, 0.4) == (2, 1)
    assert [(x, y) for x, y, _ in store.weakest_associative(0.5, 0.4, 10)] in (
        [("a", "b")], [("b", "a")])
    assert store.decay_edges("associative", 0.5, 0.4) == (2, 1)
    assert [w for _, _, w in store.associative_of(a)] == [0.45]
    assert [e.weight for e in store.edges_of(a, ("temporal",))] == [0.1]  # never decays


def test_a_merge_moves_children_and_links_and_supersedes_in_one_step(backend):
    store = backend.store
    keep = store.insert(_frag("keep", 0), now=1.0, embedding=_unit(1))
    gone = store.insert(_frag("gone", 0), now=2.0, embedding=_unit(2))
    kid = store.insert(_frag("kid", 1), now=3.0, embedding=_unit(3), parent_id=gone)
    other = store.insert(_frag("other", 0), now=4.0)
    store.upsert_associative([(gone, other, 0.8), (gone, keep, 0.9)], 4.0)
    assert [t[0] for t in store.topic_vectors()] == [keep, gone]
    assert store.topic_vectors()[0][4] == _unit(1)
    assert store.child_vectors([gone]) == [(gone, kid, "kid", _unit(3))]
    assert store.merge_topic(gone, keep, 5.0) == 1
    assert store.parent_id(kid) == keep and store.get(gone).superseded_by == keep
    assert store.associative_of(gone) == []
    assert {frozenset((x, y)) for x, y, _ in store.associative_of(keep)} == {
        frozenset((keep, other))}
    assert store.merge_topic(gone, keep, 6.0) is None  # no longer live: nothing happens
    activity = {r[0]: r[3] for r in store.child_activity()}
    assert activity == {keep: 1}


def test_forgetting_takes_older_versions_along_and_never_a_topic(backend):
    store = backend.store
    root = store.insert(_frag("root", 0), now=1.0)
    old = store.insert(_frag("old", 2), now=1.0, parent_id=root)
    new = store.insert(_frag("new", 2), now=2.0, parent_id=root)
    kid = store.insert(_frag("kid", 3), now=2.0, parent_id=new)
    store.supersede(old, new, 3.0)
    assert set(store.forget_inputs([old, new, root])) == {old, new, root}
    assert store.forget(root, 4.0) == []
    assert sorted(store.forget(new, 4.0)) == sorted([new, old])
    assert store.parent_id(kid) == root
    store.record_consolidation(5.0, 6.0, False, {"forgotten": 2})
    assert store.last_consolidation()["report"] == {"forgotten": 2}


# -- what only one backend has ---------------------------------------------------------------
def test_the_database_answers_nearest_vectors_itself(backend, embedder):
    backend.cannot("sqlite", "vectors are searched in memory (recall/search.VectorIndex)")
    from lore_plugin.embedding.embedder import to_blob

    store = backend.store
    texts = ["PostgreSQL stores the invoices", "Tailwind styles the dashboard",
             "Kafka carries billing events"]
    vectors = embedder.embed(texts)
    ids = [store.insert(_frag(t, depth=1 + (i == 2)), now=1.0, embedding=to_blob(v))
           for i, (t, v) in enumerate(zip(texts, vectors))]
    query = embedder.embed(["which database keeps invoices"])[0]
    found = store.vector_search(query, 3)
    assert found[0][0] == ids[0] and found[0][1] > found[1][1]
    assert [i for i, _ in store.vector_search(query, 3, depth=2)] == [ids[2]]
    assert store.vector_search(query, 3, window=(5.0, 9.0)) == []
    sims = store.vector_similarities(query, ids[1:])
    assert set(sims) == set(ids[1:]) and abs(sims[ids[1]] - dict(found)[ids[1]]) < 1e-5


# -- the memory engine on each backend, with the real model ---------------------------------
def _memory(backend: Backend, tmp_path, embedder, clock) -> Memory:
    if backend.name == "sqlite":
        backend.store.close()
        return Memory(tmp_path / "m.db", embedder, clock=clock, project="/work/a")
    return Memory(backend.store, embedder, clock=clock, project="/work/a")


def test_memory_queries_explores_and_traverses_on_either_backend(backend, tmp_path, embedder,
                                                                 clock):
    from tests.recall.test_memory import tree

    memory = _memory(backend, tmp_path, embedder, clock)
    try:
        ids = tree(memory)
        assert memory.query("which database holds invoices", depth=1).fragments[0].fragment.id \
            == ids["pg"]
        assert memory.query("Tailwind styling rules", depth=1).fragments[0].fragment.id \
            == ids["react"]
        assert memory.search("ERR_7731", limit=1).fragments[0].fragment.id == ids["pool"]
        assert memory.search("what does the UI look like and how is it built",
                             limit=3).fragments[0].fragment.id in (ids["react"], ids["css"], ids["ui"])
        tree_node = memory.explore("billing databases", max_depth=3)
        assert tree_node is not None and tree_node.fragment.id == ids["db"]
        assert [c.fragment.id for c in tree_node.children] == [ids["pg"]]
        assert {c.id for c in memory.children(ids["pg"])} == {ids["pool"], ids["vacuum"]}
        assert memory.parent(ids["detail"]).id == ids["vacuum"]
        assert memory.get(ids["pool"][:10]).summary == "ERR_7731 means the pool is exhausted"
        assert memory.reader.get(ids["pg"]).access_count >= 1  # recall reinforced it
    finally:
        memory.close()
