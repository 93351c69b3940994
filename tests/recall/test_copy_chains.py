"""Headings that only copy the fact below them (recall/copy_chains.py, issue 30): a memory
as store_memory built it before placement named its levels after their subject
(heading_names.py), with the real MiniLM model on a real SQLite file, outside a project: for
each fact that opened a subject, a topic and a concept that copy it, as placement then made
them (`old_chain`). Existing memories hold such chains; search must read them as they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.recall import copy_chains, prompt_candidates, prompt_recall
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.storing import Stored, store_knowledge

# Subjects far apart, so that each fact opens its own topic and concept.
FACTS = [
    "Trials last 14 days with no card needed.",
    "The office coffee machine is descaled every Friday afternoon.",
    "Stale DNS records kept the old load balancer IP cached for a day.",
    "The team offsite in spring is planned for the lake cabin.",
    "Every pull request needs one approving review from a code owner.",
    "The kitchen fridge is cleared out on the last day of each month.",
    "Backups of the billing database are kept for ninety days.",
    "New hires get their laptop on the first morning from IT.",
]
QUESTION = "How long does the free trial last, and do people need a card for it?"
# Close to the trial fact: placement puts it under that fact's concept.
SIBLING = "Trials of the paid plan last 14 days, and annual plans get two months free."


def _clip(text: str) -> str:  # placement's clip of a name then, 80 characters
    return text if len(text) <= 80 else text[:79].rstrip() + "…"


def old_chain(mem: Memory, fact: str) -> Stored:
    """What store_knowledge(mem, fact, fact) stored when nothing fit, before headingnames: a
    topic "<clipped fact>" ("Knowledge about <clipped fact>."), under it a concept with the
    fact as content and its clip as summary, and the fact under that."""
    topic = mem.store(f"Knowledge about {_clip(fact)}.", _clip(fact), depth=0)
    concept = mem.store(fact, _clip(fact), parent_id=topic.id, depth=1)
    return Stored(mem.store(fact, fact, parent_id=concept.id, depth=2), created=(topic, concept),
                  placed=True)


@pytest.fixture()
def placed(isolated_home: Path, embedder, clock):
    mem = Memory(isolated_home / "placed.db", embedder, clock=clock)
    stored = {}
    for fact in FACTS:
        clock.advance(days=1)
        stored[fact] = old_chain(mem, fact)
    yield mem, stored
    mem.close()


def test_the_old_placement_made_levels_that_copy_the_fact(placed):
    """The memory the rest of this file relies on: each fact under a topic and a concept that
    copy it (the chains existing memories hold)."""
    mem, stored = placed
    trial = stored[FACTS[0]]
    assert [f.depth for f in trial.created] == [0, 1]
    topic, concept = trial.created
    assert copy_chains.copies(concept, trial.fragment)
    assert copy_chains.copies(topic, trial.fragment)
    assert copy_chains.copies(topic, concept)


def test_a_copy_chain_takes_one_of_the_hits(placed):
    """Search finds the fact, its concept and its topic; collapsed, the chain is one hit, the
    fact, at the chain's best rank, and the other hits are other facts."""
    mem, stored = placed
    trial = stored[FACTS[0]]
    chain = {trial.fragment.id, *(f.id for f in trial.created)}
    found = mem.search(QUESTION, limit=20).fragments
    assert chain <= {s.fragment.id for s in found[:3]}  # before: the chain fills the top 3
    hits = copy_chains.collapse(mem.reader, found, 6)
    ids = [s.fragment.id for s in hits]
    assert ids[0] == trial.fragment.id
    assert not chain - {trial.fragment.id} & set(ids)
    facts = list(dict.fromkeys(s.fragment.id for s in found if s.fragment.depth == 2))
    assert len(facts) > 1 and ids == facts[:6]


def test_the_hooks_first_hits_hold_as_many_facts_as_hits(placed):
    """Three search hits give three different stored facts as candidates, not one fact
    found three times (its own, its concept's child, its topic's grandchild)."""
    mem, stored = placed
    facts = {s.fragment.id for s in stored.values()}
    found = prompt_candidates.candidates(mem, QUESTION, set(), limit=3, rare_hits=0)
    assert found is not None
    first = [c for c in found if c.rank < 3]
    assert first[0].fragment.id == stored[FACTS[0]].fragment.id
    assert len({c.fragment.id for c in first} & facts) == 3


def test_a_copy_heading_whose_fact_is_not_hit_gives_its_place_to_the_fact(placed):
    """With one hit, the chain's heading is that hit and its fact is not: the fact takes the
    heading's place (rank 0) among the candidates, the heading is never one."""
    mem, stored = placed
    trial = stored[FACTS[0]]
    first = mem.search(QUESTION, limit=1).fragments[0].fragment
    assert first.id in {f.id for f in trial.created}
    found = prompt_candidates.candidates(mem, QUESTION, set(), limit=1, rare_hits=0,
                                         neighbours_of=0)
    assert found is not None
    assert found[0].fragment.id == trial.fragment.id and found[0].rank == 0
    assert not {c.fragment.id for c in found} & {f.id for f in trial.created}


def test_the_path_above_an_answer_leaves_out_the_levels_that_copy_it(placed, clock):
    """The trial fact's own copies leave it no path; a fact placed under the trial's
    concept shows that concept once, not "Trials… › Trials…"."""
    mem, stored = placed
    clock.advance(days=1)
    sibling = store_knowledge(mem, SIBLING, SIBLING)
    trial = stored[FACTS[0]]
    assert not sibling.created and sibling.fragment.parent_id == trial.created[1].id
    where = prompt_candidates.paths(mem.reader, [trial.fragment, sibling.fragment])
    assert where[trial.fragment.id] == ""
    assert where[sibling.fragment.id] == "Trials last 14 days wit…"
    text, _ = prompt_recall.compose([sibling.fragment], store=mem.reader)
    assert text is not None and "Trials last 14 days wit…: Trials of the paid plan" in text


def test_a_real_heading_over_a_fact_that_begins_with_its_name_is_kept(isolated_home, embedder,
                                                                       clock):
    """"Deployment" over "Deployment uses blue-green" names a branch, even with nothing more in
    its content: it keeps its place among the hits and in the path. So does a heading with
    the fact's summary whose content says more. A concept that only repeats the fact is
    replaced by it."""
    mem = Memory(isolated_home / "real.db", embedder, clock=clock)
    try:
        topic = store_knowledge(mem, "Deployment", "Deployment", depth=0).fragment
        concept = store_knowledge(mem, "Deployment uses blue-green", "Deployment uses blue-green",
                                  parent_id=topic.id, depth=1).fragment
        fact = store_knowledge(mem, "Deployment uses blue-green, with the old colour kept "
                               "warm for an hour.", "Deployment uses blue-green",
                               parent_id=concept.id, depth=2).fragment
        assert not copy_chains.copies(topic, fact) and not copy_chains.copies(topic, concept)
        assert copy_chains.copies(concept, fact)
        rich = store_knowledge(mem, "Blue-green, canaries and rollbacks: how releases reach "
                               "production.", "Deployment uses blue-green", depth=0).fragment
        assert not copy_chains.copies(rich, fact)
        found = mem.search("deployment blue-green", limit=10).fragments
        assert concept.id in {s.fragment.id for s in found}
        ids = [s.fragment.id for s in copy_chains.collapse(mem.reader, found, 10)]
        assert topic.id in ids and fact.id in ids and rich.id in ids and concept.id not in ids
        assert prompt_candidates.paths(mem.reader, [fact])[fact.id] == "Deployment"
    finally:
        mem.close()


def test_a_heading_that_reads_like_a_fact_in_another_branch_is_kept(isolated_home, embedder,
                                                                     clock):
    """Only a heading above the fact gives it its place: a topic elsewhere that happens to
    say the same heads its own branch."""
    mem = Memory(isolated_home / "apart.db", embedder, clock=clock)
    try:
        text = "Backups of the billing database are kept for ninety days."
        fact = store_knowledge(mem, text, text).fragment
        other = mem.store(text, text, depth=0, source="user")  # as an import might make it
        assert other.id not in mem.reader.ancestors(fact.id)
        below = store_knowledge(mem, "Restores are tested every quarter.", "Restore drills",
                                parent_id=other.id, depth=1).fragment
        assert copy_chains.copies(other, fact)
        found = mem.search("How long are billing backups kept?", limit=20).fragments
        assert other.id in {s.fragment.id for s in found}
        ids = [s.fragment.id for s in copy_chains.collapse(mem.reader, found, 20)]
        assert other.id in ids and fact.id in ids and below.id
    finally:
        mem.close()


def test_a_concept_named_after_the_answers_first_words_is_left_out_of_its_path(
        isolated_home, embedder, clock):
    """In a project, placement names the concept it makes for a lone fact after the fact's
    subject ("Checking significance"): above that fact the name only repeats its first words,
    so the path leaves it out; above a later fact of the same subject it says what the branch
    holds and stays. A heading named by hand is kept (the Deployment test above)."""
    mem = Memory(isolated_home / "named.db", embedder, clock=clock, project="/home/dev/orchard")
    try:
        first = store_knowledge(mem, "Checking significance daily inflates type I error; use "
                                "sequential testing.", "Checking significance daily inflates "
                                "type I error; use sequential testing.")
        topic, concept = first.created
        assert (topic.summary, concept.summary) == ("Project orchard", "Checking significance")
        clock.advance(days=1)
        later = store_knowledge(mem, "Significance of an A/B test is read once, at the "
                                "planned horizon.", "Significance of an A/B test is read once.")
        assert later.fragment.parent_id == concept.id
        where = prompt_candidates.paths(mem.reader, [first.fragment, later.fragment])
        assert where[first.fragment.id] == "Project orchard"
        assert where[later.fragment.id] == "Project orchard › Checking significance"
    finally:
        mem.close()
