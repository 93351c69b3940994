"""Curation through the memory engine: every action keeps FTS and vectors in step with the
text, and is undone exactly (until a consolidation), except forgetting, which is final."""

from __future__ import annotations

import pytest

from lore_plugin.core.errors import InvalidInput
from lore_plugin.maintenance.curation import FORGET_NOTE, Curator
from lore_plugin.recall.memory import Memory
from tests.recall.test_memory import tree


@pytest.fixture()
def cur(memory: Memory) -> Curator:
    return Curator(memory)


def top(memory: Memory, text: str, depth: int) -> str:
    return memory.query(text, depth=depth, limit=1, reinforce=False).fragments[0].fragment.id


def state(memory: Memory) -> dict[str, tuple]:
    """Everything curation may touch: text, vector, supersession, parent, confirmation and
    associative edges, for every fragment."""
    store = memory.writer
    rows = store.execute("SELECT id, summary, content, embedding, superseded_by, confirmed_at "
                         "FROM fragments ORDER BY id")
    parents = store.parent_ids([r[0] for r in rows])
    links = sorted(store.execute("SELECT source, target, kind, weight FROM edges "
                                 "WHERE kind != 'hierarchical'"))
    return {r[0]: (*r[1:], parents.get(r[0])) for r in rows} | {"links": tuple(links)}


def test_an_edit_is_found_by_its_new_words_and_meaning_and_its_undo_restores_everything(
        memory, cur):
    ids = tree(memory)
    before = state(memory)
    cur.edit(ids["vacuum"], "Autovacuum moved to Sundays",
             "Autovacuum on the invoices table now runs weekly, on Sunday mornings.")
    hits = memory.writer.keyword_search('"Sundays"', 5)
    assert [f.id for f, _ in hits] == [ids["vacuum"]]
    assert top(memory, "when does the weekly vacuum of invoices run", 2) == ids["vacuum"]
    assert memory.writer.embedding_of(ids["vacuum"]) != before[ids["vacuum"]][2]
    [entry] = cur.history()
    assert entry.undoable and entry.action == "edit"
    cur.undo(entry.id)
    assert state(memory) == before
    assert memory.writer.keyword_search('"Sundays"', 5) == []
    assert not cur.history()[0].undoable and cur.history()[0].why_not == "undone"
    with pytest.raises(InvalidInput):
        cur.undo(entry.id)


def test_a_correction_supersedes_the_old_fragment_takes_its_children_and_undoes_cleanly(
        memory, cur):
    ids = tree(memory)
    before = state(memory)
    new = cur.correct(ids["pg"], "PostgreSQL 17 for invoices",
                      "The billing service moved its invoices to PostgreSQL 17.")
    old = memory.writer.get(ids["pg"])
    assert old.superseded_by == new.id and new.parent_id == ids["db"]
    assert new.source == "viewer" and new.confirmed_at is not None
    assert set(memory.writer.child_ids(new.id)) == {ids["pool"], ids["vacuum"]}
    assert top(memory, "which PostgreSQL version holds invoices", 1) == new.id
    cur.undo(cur.history()[0].id)
    assert state(memory) == before
    assert top(memory, "which PostgreSQL version holds invoices", 1) == ids["pg"]


def test_move_merge_and_confirm_each_undo_to_the_exact_state_before(memory, cur):
    ids = tree(memory)
    memory.writer.upsert_associative([(ids["db"], ids["ui"], 0.4)], 1.0)
    before = state(memory)
    cur.move(ids["css"], ids["pg"])
    assert memory.writer.parent_id(ids["css"]) == ids["pg"]
    cur.merge(ids["ui"], ids["db"])
    assert memory.writer.get(ids["ui"]).superseded_by == ids["db"]
    assert memory.writer.parent_id(ids["react"]) == ids["db"]
    cur.confirm(ids["vacuum"])
    assert memory.writer.get(ids["vacuum"]).confirmed_at is not None
    for entry in cur.history():  # newest first, as a person would
        cur.undo(entry.id)
    assert state(memory) == before


def test_a_merge_joins_the_victims_cues_to_the_survivor_and_its_undo_takes_them_back(
        memory, cur):
    ids = tree(memory)
    store = memory.writer
    store.update_text(ids["db"], cues="invoice storage\nbilling db")
    store.update_text(ids["ui"], cues="Billing DB\nfrontend stack")
    survivor = cur.merge(ids["ui"], ids["db"])
    assert survivor.cues == "invoice storage\nbilling db\nfrontend stack"
    assert ids["db"] in {f.id for f, _ in store.keyword_search('"frontend"', 5)}
    cur.undo(cur.history()[0].id)
    assert store.get(ids["db"]).cues == "invoice storage\nbilling db"
    assert store.get(ids["ui"]).cues == "Billing DB\nfrontend stack"


def test_moves_keep_the_levels_of_the_tree(memory, cur):
    ids = tree(memory)
    with pytest.raises(InvalidInput, match="depth"):
        cur.move(ids["css"], ids["db"])  # a fact under a topic
    with pytest.raises(InvalidInput, match="merge"):
        cur.move(ids["db"], ids["ui"])
    with pytest.raises(InvalidInput, match="only topics"):
        cur.merge(ids["pg"], ids["db"])


def test_forgetting_is_final_says_so_and_leaves_no_copy_in_the_journal(memory, cur):
    ids = tree(memory)
    cur.edit(ids["pool"], "Pool exhaustion: ERR_7731", "secret-ish words ZEBRAQUOTA")
    gone = cur.forget(ids["pg"], with_children=False)
    assert gone == [ids["pg"]]
    assert memory.writer.parent_id(ids["pool"]) == ids["db"]  # children moved up
    gone = cur.forget(ids["pool"], with_children=False)
    history = cur.history()
    assert history[0].action == "forget" and not history[0].undoable
    assert history[0].why_not == FORGET_NOTE
    assert all(not e.undoable for e in history)  # the edit's before-image went with it
    journal = memory.writer.execute("SELECT label || undo FROM curation_journal")
    assert not any("ERR_7731" in row[0] or "pool" in row[0].lower() for row in journal)
    assert [e.label for e in history if e.action == "edit"] == ["edit (a fragment since forgotten)"]
    assert memory.writer.keyword_search('"ZEBRAQUOTA"', 5) == []


def test_forgetting_a_topic_takes_its_subtree_or_refuses_to_orphan_it(memory, cur):
    ids = tree(memory)
    with pytest.raises(InvalidInput, match="children"):
        cur.forget(ids["ui"], with_children=False)
    gone = cur.forget(ids["ui"], with_children=True)
    assert set(gone) == {ids["ui"], ids["react"], ids["css"]}
    assert not memory.writer.execute("SELECT 1 FROM fragments WHERE id IN (?, ?, ?)",
                                     (ids["ui"], ids["react"], ids["css"]))


def test_nothing_is_undoable_once_a_consolidation_has_run(memory, cur, clock):
    ids = tree(memory)
    cur.edit(ids["css"], "Tailwind v4 only", "Styling uses Tailwind v4.")
    clock.advance(seconds=5)
    memory.writer.record_consolidation(clock() - 1, clock(), False, {})
    [entry] = cur.history()
    assert not entry.undoable and entry.why_not == "a consolidation ran since"
    with pytest.raises(InvalidInput, match="cannot be undone"):
        cur.undo(entry.id)
    assert memory.writer.execute("SELECT undo FROM curation_journal") == [("{}",)]


def test_curation_refuses_superseded_versions_and_empty_text(memory, cur):
    ids = tree(memory)
    new = cur.correct(ids["css"], "Tailwind v4", "Styling uses Tailwind v4.")
    with pytest.raises(InvalidInput, match="superseded"):
        cur.edit(ids["css"], "x", "y")
    with pytest.raises(InvalidInput, match="empty"):
        cur.edit(new.id, "   ", "y")


def test_forgetting_a_fragment_an_undo_would_need_makes_that_undo_say_so(memory, cur):
    ids = tree(memory)
    cur.move(ids["css"], ids["pg"])
    cur.forget(ids["react"], with_children=False)  # the place the move would return it to
    move = next(e for e in cur.history() if e.action == "move")
    assert not move.undoable and move.why_not == "its details are gone"
    with pytest.raises(InvalidInput, match="cannot be undone"):
        cur.undo(move.id)
    assert memory.writer.parent_id(ids["css"]) == ids["pg"]


def test_forgetting_in_the_viewer_scrubs_consolidation_reports_as_lore_forget_does(
        memory, cur, clock, tmp_path):
    import json

    from lore_plugin.consolidation.cycle import consolidate
    from lore_plugin.core.config import Settings
    from lore_plugin.maintenance.operations import FORGOTTEN

    ids = tree(memory)
    settings = Settings(db_path=memory.db_path, home=tmp_path / "home",
                        similarity_threshold=0.05, merge_threshold=0.99,
                        concept_link_threshold=0.05)
    consolidate(settings, memory.writer, clock)
    assert "'PostgreSQL for invoices' <->" in json.dumps(memory.writer.last_consolidation())
    cur.forget(ids["pg"], with_children=False)
    after = json.dumps(memory.writer.last_consolidation()["report"])
    assert "PostgreSQL for invoices" not in after and FORGOTTEN in after


def _vector_of(memory: Memory, fid: str) -> bytes:
    return memory.writer.execute("SELECT embedding FROM fragments WHERE id = ?", (fid,))[0][0]


def _expected_vector(memory: Memory, fid: str) -> bytes:
    """What the fragment's vector must be for its text under its current parent."""
    from lore_plugin.embedding.embedder import to_blob
    from lore_plugin.recall.memory import embedding_text

    frag = memory.get(fid)
    parent = memory.parent(fid)
    return to_blob(memory.embed_one(embedding_text(frag.summary, frag.content,
                                                   parent.summary if parent else None)))


def test_children_take_their_parents_new_summary_into_their_vectors(memory, cur):
    """A fragment's vector embeds its parent's summary as context, so renaming a concept, or
    moving a fact elsewhere, re-embeds what now sits in a new context; a content-only edit
    leaves the children alone."""
    ids = tree(memory)
    pool_before = _vector_of(memory, ids["pool"])
    pg = memory.get(ids["pg"])
    cur.edit(ids["pg"], pg.summary, pg.content + " Replicas lag under a second.")
    assert _vector_of(memory, ids["pool"]) == pool_before  # the summary did not change
    cur.edit(ids["pg"], "Invoice storage on Postgres", memory.get(ids["pg"]).content)
    assert _vector_of(memory, ids["pool"]) != pool_before
    for child in (ids["pool"], ids["vacuum"]):
        assert _vector_of(memory, child) == _expected_vector(memory, child)
    cur.move(ids["css"], ids["pg"])
    assert _vector_of(memory, ids["css"]) == _expected_vector(memory, ids["css"])
    entry = next(e for e in cur.history() if e.action == "move")
    cur.undo(entry.id)
    assert memory.parent(ids["css"]).id == ids["react"]
    assert _vector_of(memory, ids["css"]) == _expected_vector(memory, ids["css"])
