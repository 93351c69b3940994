"""Brain behaviour of the memory core, each test on a fresh database file with the real model."""

from __future__ import annotations

import pytest

from lore_plugin.core import relevance as rel
from lore_plugin.core.errors import AmbiguousId, InvalidInput, NotFound
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.memory_base import CLEAR_LEAD

DAY = rel.DAY


def tree(memory: Memory) -> dict[str, str]:
    """A small realistic memory: two topics, concepts, facts and a detail."""
    ids: dict[str, str] = {}
    ids["db"] = memory.store("Databases used in the billing service", "Billing database", depth=0).id
    ids["pg"] = memory.store("The billing service stores invoices in PostgreSQL 16 with "
                             "logical replication to the warehouse.", "PostgreSQL for invoices",
                             parent_id=ids["db"], depth=1).id
    ids["pool"] = memory.store("Connection pool exhaustion shows up as ERR_7731 in the gateway "
                               "logs; raise pool_size to 40.", "ERR_7731 means the pool is exhausted",
                               parent_id=ids["pg"], depth=2).id
    ids["vacuum"] = memory.store("Autovacuum runs nightly at 02:00 UTC on the invoices table.",
                                 "Nightly autovacuum on invoices", parent_id=ids["pg"], depth=2).id
    ids["detail"] = memory.store("The cron entry lives in ops/cron/vacuum.yaml.",
                                 "Vacuum cron file location", parent_id=ids["vacuum"], depth=3).id
    ids["ui"] = memory.store("Frontend conventions for the dashboard", "Dashboard frontend", depth=0).id
    ids["react"] = memory.store("The dashboard is written in React with TypeScript strict mode "
                                "and uses TanStack Query for data fetching.", "React dashboard stack",
                                parent_id=ids["ui"], depth=1).id
    ids["css"] = memory.store("Styling uses Tailwind; no CSS-in-JS libraries are allowed.",
                              "Tailwind only, no CSS-in-JS", parent_id=ids["react"], depth=2).id
    return ids


def summaries(recall) -> list[str]:
    return [s.fragment.summary for s in recall.fragments]


def test_a_query_at_depth_one_returns_the_concepts_of_the_matching_branch(memory):
    ids = tree(memory)
    got = memory.query("which database holds invoices", depth=1).fragments
    assert got[0].fragment.id == ids["pg"]


def test_a_fact_level_match_lifts_its_concept_when_querying_shallow(memory):
    ids = tree(memory)
    got = memory.query("Tailwind styling rules", depth=1).fragments
    assert got[0].fragment.id == ids["react"]


def test_a_topic_match_brings_its_concepts_when_querying_deeper(memory):
    ids = tree(memory)
    got = memory.query("Dashboard frontend", depth=2).fragments
    assert got[0].fragment.id == ids["css"]


def test_an_identifier_alone_finds_its_fragment_through_keywords(memory):
    ids = tree(memory)
    got = memory.query("ERR_7731", depth=2).fragments
    assert got[0].fragment.id == ids["pool"]


def test_a_paraphrase_sharing_no_words_finds_its_fragment_through_vectors(memory):
    ids = tree(memory)
    got = memory.query("too many simultaneous clients exhausted the available connections",
                       depth=2).fragments
    assert got[0].fragment.id == ids["pool"]


def test_hybrid_recall_beats_either_signal_alone(memory):
    ids = tree(memory)
    errors = memory.store("Error codes seen in production", "Production error codes",
                          parent_id=ids["db"], depth=1).id
    for code, meaning in [("ERR_7713", "the disk quota of the pool volume is full"),
                          ("ERR_1377", "a TLS handshake failed at the gateway"),
                          ("ERR_7731X", "a retired code from the old gateway"),
                          ("E_POOL", "the worker pool restarted after a deploy")]:
        memory.store(f"{code} means {meaning}.", f"{code}: {meaning}", parent_id=errors, depth=2)
    queries = {
        "ERR_7731": ids["pool"],  # an identifier: vectors see near-identical codes
        "users could not get a free database handle under heavy traffic": ids["pool"],  # no shared words
        "when does the invoice table get cleaned up": ids["vacuum"],
        "which styling approach is permitted": ids["css"],
        "Tailwind": ids["css"],
    }

    def top(query: str, mode: str) -> str | None:
        found = memory.search(query, limit=1, depth=2, mode=mode).fragments
        return found[0].fragment.id if found else None

    score = {mode: sum(top(q, mode) == want for q, want in queries.items())
             for mode in ("hybrid", "vector", "keyword")}
    assert score["hybrid"] == len(queries), score
    assert score["hybrid"] > score["vector"] and score["hybrid"] > score["keyword"], score


def test_superseded_fragments_are_hidden_unless_asked_for(memory, clock):
    ids = tree(memory)
    newer = memory.store("Autovacuum now runs hourly on the invoices table.", "Hourly autovacuum",
                         parent_id=ids["pg"], depth=2)
    memory.writer.supersede(ids["vacuum"], newer.id, clock())
    shown = [s.fragment.id for s in memory.query("autovacuum schedule", depth=2).fragments]
    assert newer.id in shown and ids["vacuum"] not in shown
    hidden = [s.fragment.id for s in memory.query("autovacuum schedule", depth=2,
                                                   include_superseded=True).fragments]
    assert ids["vacuum"] in hidden
    assert memory.get(ids["vacuum"]).superseded_by == newer.id
    kinds = {kind for _, kind, _ in memory.associations(newer.id)}
    assert "supersedes" in kinds


def test_recall_reinforces_what_it_returns_and_spreads_to_the_parent(memory, clock):
    ids = tree(memory)
    clock.advance(days=30)
    before_fact = memory.get(ids["pool"])
    before_parent = memory.get(ids["pg"])
    memory.query("ERR_7731", depth=2, limit=1)
    after_fact = memory.get(ids["pool"])
    after_parent = memory.get(ids["pg"])
    assert after_fact.access_count == before_fact.access_count + 1
    assert after_fact.last_reinforced == clock() and after_fact.relevance_score > before_fact.relevance_score
    assert after_parent.access_count == before_parent.access_count  # spread is not an access
    assert before_parent.last_reinforced < after_parent.last_reinforced < clock()


def test_reinforced_knowledge_outranks_equally_matching_neglected_knowledge(memory, clock):
    topic = memory.store("Team rituals", "Team rituals", depth=0).id
    a = memory.store("Standup happens at 9:30 every weekday.", "Standup time", parent_id=topic, depth=1).id
    b = memory.store("Standup happens at 9:30 on weekdays in the lobby.", "Standup place",
                     parent_id=topic, depth=1).id
    for _ in range(5):
        clock.advance(days=7)
        memory.reinforce([b])
    clock.advance(days=60)
    ranked = [s.fragment.id for s in memory.query("standup at 9:30", depth=1).fragments]
    assert ranked.index(b) < ranked.index(a)


def test_unique_id_prefixes_resolve_and_ambiguous_or_unknown_ones_explain_themselves(memory):
    ids = tree(memory)
    assert memory.get(ids["pool"][:8]).id == ids["pool"]
    with pytest.raises(NotFound):
        memory.get("00000000")
    with pytest.raises(InvalidInput):
        memory.get("not an id")
    store = memory.writer
    for suffix in ("1", "2"):
        store.conn.execute("INSERT INTO fragments (id, content, summary, depth, created_at, last_accessed, "
                           "last_reinforced) VALUES (?, 'x', 'x', 0, 0, 0, 0)", ("abcdef12" + suffix * 24,))
    with pytest.raises(AmbiguousId):
        memory.get("abcdef12")


def test_store_validates_text_depth_and_parent(memory):
    ids = tree(memory)
    with pytest.raises(InvalidInput):
        memory.store("  ", "summary", depth=0)
    with pytest.raises(InvalidInput):
        memory.store("content", "", depth=0)
    with pytest.raises(InvalidInput, match="depth 1"):
        memory.store("content", "summary", parent_id=ids["db"], depth=2)
    with pytest.raises(NotFound):
        memory.store("content", "summary", parent_id="deadbeef00", depth=1)
    with pytest.raises(InvalidInput):
        memory.query("x", depth=-1)
    with pytest.raises(InvalidInput):
        memory.query("x", limit=1000)


def test_storing_the_same_knowledge_twice_keeps_one_copy(memory):
    ids = tree(memory)
    again = memory.store("Autovacuum runs nightly at 02:00 UTC on the invoices table.",
                         "Nightly autovacuum on invoices", parent_id=ids["pg"], depth=2)
    assert again.id == ids["vacuum"]
    other = memory.store("Autovacuum runs weekly now.", "Nightly autovacuum on invoices",
                         parent_id=ids["pg"], depth=2)
    assert other.id != ids["vacuum"]  # same name, new content: a new fragment


def test_store_without_a_parent_places_the_fragment_under_the_best_match(memory):
    ids = tree(memory)
    frag = memory.store("Invoices older than seven years are archived to cold storage.",
                        "Invoice archival policy", depth=1)
    assert frag.parent_id == ids["db"]


def test_explore_returns_the_best_topic_subtree_to_the_requested_depth(memory):
    ids = tree(memory)
    node = memory.explore("postgres invoices", max_depth=2)
    assert node.fragment.id == ids["db"]
    concept = node.children[0]
    assert concept.fragment.id == ids["pg"]
    assert {c.fragment.id for c in concept.children} == {ids["pool"], ids["vacuum"]}
    assert all(not c.children for c in concept.children)  # depth 3 is cut off
    deeper = memory.explore("postgres invoices", max_depth=3)
    vacuum = next(c for c in deeper.children[0].children if c.fragment.id == ids["vacuum"])
    assert vacuum.children[0].fragment.id == ids["detail"]


def test_topics_list_counts_descendants_and_prefers_the_current_project(memory, db_path, embedder, clock):
    ids = tree(memory)
    other = Memory(db_path, embedder, clock=clock, project="/work/project-b")
    other.store("Project B notes", "Project B", depth=0)
    topics = memory.topics()
    counts = {t.fragment.id: t.fragment_count for t in topics}
    assert counts[ids["db"]] == 4 and counts[ids["ui"]] == 2
    assert topics[-1].fragment.summary == "Project B"
    assert other.topics()[0].fragment.summary == "Project B"
    other.close()


def test_the_current_project_ranks_first_without_hiding_other_projects(memory, db_path, embedder, clock):
    topic = memory.store("Deployment", "Deployment", depth=0).id
    memory.store("Deploys go through the blue-green pipeline.", "Blue-green deploys",
                 parent_id=topic, depth=1)
    other = Memory(db_path, embedder, clock=clock, project="/work/project-b")
    other.store("Deploys go through the blue-green pipeline too.", "Blue-green deploys in B",
                parent_id=topic, depth=1)
    mine = [s.fragment.project for s in memory.query("blue-green deploys", depth=1).fragments]
    theirs = [s.fragment.project for s in other.query("blue-green deploys", depth=1).fragments]
    assert mine == ["/work/project-a", "/work/project-b"]
    assert theirs == ["/work/project-b", "/work/project-a"]
    other.close()


def test_without_a_model_keyword_search_works_and_embeddings_are_filled_in_later(db_path, embedder, clock):
    blind = Memory(db_path, None, clock=clock)
    topic = blind.store("Billing", "Billing", depth=0).id
    blind.store("Refunds are processed by the ledger worker.", "Refund processing", parent_id=topic, depth=1)
    recall = blind.query("refunds ledger", depth=1)
    assert recall.keyword_only and recall.fragments[0].fragment.summary == "Refund processing"
    assert blind.writer.counts()["without_embedding"] == 2
    seeing = Memory(db_path, embedder, clock=clock)
    assert seeing.backfill_embeddings() == 2
    assert seeing.writer.counts()["without_embedding"] == 0
    got = seeing.query("money returned to customers", depth=1)
    assert not got.keyword_only and got.fragments[0].fragment.summary == "Refund processing"
    blind.close()
    seeing.close()


def test_new_fragments_become_searchable_by_a_reader_that_already_loaded_its_index(
        memory, db_path, embedder, clock):
    ids = tree(memory)
    memory.query("anything about databases", depth=1)  # loads the vector index
    writer = Memory(db_path, embedder, clock=clock)
    writer.store("Payments settle through Stripe Connect.", "Stripe Connect settlement",
                 parent_id=ids["db"], depth=1)
    got = memory.query("how do payouts settle", depth=1).fragments
    assert got[0].fragment.summary == "Stripe Connect settlement"
    writer.close()


def test_edges_are_idempotent_keep_the_strongest_weight_and_decay_until_pruned(memory, clock):
    ids = tree(memory)
    store = memory.writer
    store.link(ids["pg"], ids["react"], "associative", 0.3, clock())
    store.link(ids["pg"], ids["react"], "associative", 0.5, clock())
    edges = store.edges_by_kind("associative")
    assert len(edges) == 1 and edges[0].weight == 0.5
    cycles = 0
    while store.edges_by_kind("associative"):
        store.decay_edges("associative", 0.95, 0.15)
        cycles += 1
    assert cycles == 24  # 0.5 * 0.95^24 < 0.15 <= 0.5 * 0.95^23
    assert len(store.edges_by_kind("hierarchical")) == 6  # hierarchy never decays
    with pytest.raises(InvalidInput):
        store.link(ids["pg"], ids["pg"], "associative", 1.0, clock())


def test_temporal_edges_link_siblings_in_order_and_show_as_associations(memory, clock):
    ids = tree(memory)
    memory.writer.link(ids["pool"], ids["vacuum"], "temporal", 1.0, clock())
    kinds = {(f.id, kind) for f, kind, _ in memory.associations(ids["vacuum"])}
    assert (ids["pool"], "temporal") in kinds
    assert [f.id for f in memory.children(ids["pg"])] == [ids["pool"], ids["vacuum"]]


def test_deleting_a_fragment_reparents_its_children_and_leaves_no_trace(memory, clock):
    ids = tree(memory)
    memory.writer.delete(ids["vacuum"], clock())
    assert memory.parent(ids["detail"]).id == ids["pg"]
    store = memory.writer
    assert store.execute("SELECT count(*) FROM edges WHERE source = ? OR target = ?",
                         (ids["vacuum"], ids["vacuum"]))[0][0] == 0
    assert store.keyword_search('"autovacuum"', 10) == []
    assert store.fts_consistent()
    assert store.integrity_check() == ["ok"]


def test_results_carry_their_full_text_although_candidates_are_ranked_without_it(memory):
    ids = tree(memory)
    memory.writer.set_metadata(ids["pool"], {"source": "incident 42"})
    for recall in (memory.query("ERR_7731 pool", depth=2), memory.search("ERR_7731 pool", limit=3)):
        best = recall.fragments[0].fragment
        assert best.id == ids["pool"]
        assert best.summary == "ERR_7731 means the pool is exhausted"
        assert best.content.startswith("Connection pool exhaustion")
        assert best.metadata == {"source": "incident 42"} and best.parent_id == ids["pg"]
        assert all(s.fragment.content and s.fragment.summary for s in recall.fragments)


def test_relevance_and_the_project_break_near_ties_but_never_a_clear_similarity_lead(
        memory, db_path, embedder, clock, monkeypatch):
    """Issue 16: what is used, recent and in this project wins among near-equal matches (the
    two tests above), but a note that matches clearly better (CLEAR_LEAD) ranks first even
    when it is old, never recalled and from another project."""
    from lore_plugin.recall import memory as engine

    topic = memory.store("Deployment", "Deployment", depth=0).id
    elsewhere = Memory(db_path, embedder, clock=clock, project="/work/project-b")
    clear = elsewhere.store("Production deploys go through the blue-green pipeline; traffic "
                            "flips once the green stack passes its checks.",
                            "Blue-green production deploys", parent_id=topic, depth=1).id
    elsewhere.close()
    clock.advance(days=200)
    weaker = memory.store("The deploy job posts its summary to the #releases channel.",
                          "Deploy summaries in #releases", parent_id=topic, depth=1).id
    for _ in range(8):
        clock.advance(days=2)
        memory.reinforce([weaker])
    query = "how do blue-green production deploys flip traffic"
    monkeypatch.setattr(engine, "RELEVANCE_WEIGHT", 0.0)
    monkeypatch.setattr(engine, "PROJECT_BOOST", 1.0)
    match = {s.fragment.id: s.score for s in memory.search(query, depth=1).fragments}
    assert match[clear] >= CLEAR_LEAD * match[weaker], match
    favoured = memory.get(weaker)
    assert favoured.relevance_score > 2 * memory.get(clear).relevance_score
    monkeypatch.undo()
    assert engine.PROJECT_BOOST / (1 - engine.RELEVANCE_WEIGHT) < CLEAR_LEAD
    ranked = [s.fragment.id for s in memory.search(query, depth=1).fragments]
    assert ranked.index(clear) < ranked.index(weaker)


def test_no_relevance_or_project_can_overturn_a_clear_lead_at_the_extremes(memory):
    """The bound itself: the least relevant fragment from another project, matching
    CLEAR_LEAD times better, still ranks above the most relevant one from this project."""
    from lore_plugin.core.types import Fragment

    def frag(fid: str, relevance: float, project: str) -> Fragment:
        return Fragment(fid, "", "", 1, 0.0, 0.0, 0, 0.5, 0.0, 0.0, relevance, project=project)

    frags = {"clear": frag("clear", 0.0, "/work/elsewhere"),
             "favoured": frag("favoured", 9.0, "/work/project-a")}
    scores = {"clear": 1.0, "favoured": 0.999 / CLEAR_LEAD}
    ranked = memory._rank(scores, frags, {}, 2)
    assert [s.fragment.id for s in ranked] == ["clear", "favoured"]
    scores["favoured"] = 1.0  # an equal match: relevance and the project decide
    assert [s.fragment.id for s in memory._rank(scores, frags, {}, 2)] == ["favoured", "clear"]
