"""Storing the easy way: placement without a parent, near-duplicates reinforced instead of
copied (store_memory, lore remember, extraction), and one project key per repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lore_plugin.capture.extract import Extraction, parse_extraction
from lore_plugin.capture.ingest import Ingestor
from lore_plugin.capture.transcript import read_delta
from lore_plugin.core.config import Settings
from lore_plugin.core.project import project_key
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.storing import LOOSE, PLACED_NAME, store_knowledge, stored_text
from tests.transcripts import TranscriptWriter

FACT = "The billing deploy window is Thursday 09:00 UTC"
FACT_TEXT = "Agreed in conversation: deploys happen Thursday 09:00 UTC."


def live_count(memory: Memory, depth: int | None = None) -> int:
    sql = "SELECT count(*) FROM fragments WHERE superseded_by IS NULL"
    if depth is not None:
        sql += f" AND depth = {int(depth)}"
    return int(memory.reader.execute(sql)[0][0])


def test_the_first_fact_in_an_empty_memory_gets_a_topic_and_a_concept_named_for_its_subject(
        memory):
    stored = store_knowledge(memory, FACT_TEXT, FACT)
    assert not stored.duplicate and stored.fragment.depth == 2
    topic, concept = stored.created
    assert (topic.depth, concept.depth) == (0, 1)
    assert topic.summary == "Project project-a"  # the memory's project is /work/project-a
    # Named after what the fact is about, not a copy of it: the day and hour are the fact's.
    assert concept.summary == concept.content == "Billing deploy window"
    assert topic.metadata[PLACED_NAME] == "project" and concept.metadata[PLACED_NAME] == "subject"
    assert stored.fragment.parent_id == concept.id and memory.parent(concept.id).id == topic.id
    text = stored_text(stored, memory.parent(stored.fragment.id))
    assert stored.fragment.id in text and "made topic" in text
    assert "made concept" in text and "Billing deploy window to hold it" in text


# Facts of unrelated subjects, each the first of its kind: (summary, the concept made for it).
SUBJECTS = [
    ("Canary deploys: a new build takes 5% of traffic for an hour before full rollout.",
     "Canary deploys"),
    ("A lock file pins every package to an exact hash; uv sync installs exactly that set.",
     "Lock file"),
    ("Deployed new Spark job for the materialization pipeline.", "New Spark job"),
    ("The running group meets Wednesdays at 7:00 by the river.", "Running group"),
]


def test_levels_made_for_lone_facts_name_their_subject_and_never_copy_the_fact(memory):
    """Issue 30: a concept that copied its first fact was a second hit for that fact in every
    search, and the name of a branch that later held other facts."""
    for summary, subject in SUBJECTS:
        stored = store_knowledge(memory, summary, summary)
        concept = memory.parent(stored.fragment.id)
        assert stored.created and stored.created[-1].id == concept.id, summary
        assert (concept.summary, concept.content) == (subject, subject)
        assert summary.rstrip(".") not in (concept.summary, concept.content)
    assert live_count(memory, 0) == 1 and live_count(memory, 1) == len(SUBJECTS)


def test_outside_a_project_loose_facts_share_one_topic_instead_of_one_each(
        tmp_path, embedder, clock):
    memory = Memory(tmp_path / "loose.db", embedder, clock=clock)  # no project
    try:
        made = [store_knowledge(memory, summary, summary) for summary, _ in SUBJECTS]
        topics = {memory.parent(memory.parent(s.fragment.id).id).id for s in made}
        assert len(topics) == 1 and live_count(memory, 0) == 1
        topic = memory.get(topics.pop())
        assert topic.summary == LOOSE[0] and topic.metadata[PLACED_NAME] == "loose"
        assert [memory.parent(s.fragment.id).summary for s in made] == [
            subject for _, subject in SUBJECTS]
    finally:
        memory.close()


def test_an_unrelated_fact_gets_a_concept_of_its_own_subject_not_the_first_facts_name(memory):
    first = store_knowledge(memory, FACT_TEXT, FACT)
    related = store_knowledge(memory, "Billing deploys are frozen in the last week of December.",
                              "Billing deploy freeze in late December")
    assert related.fragment.parent_id == first.fragment.parent_id  # related: one concept
    other = store_knowledge(memory, SUBJECTS[3][0], SUBJECTS[3][0])
    home = memory.parent(other.fragment.id)
    assert home.id != first.fragment.parent_id and home.summary == "Running group"
    assert memory.get(first.fragment.parent_id).summary == "Billing deploy window"


def test_a_fact_of_a_subject_already_named_joins_that_concept_and_repeats_are_still_caught(
        memory):
    canary = SUBJECTS[0][0]
    first = store_knowledge(memory, canary, canary)
    later = store_knowledge(memory, "Canary deploys: the on-call engineer may end one early.",
                            "Canary deploys: the on-call engineer may end one early.")
    assert later.created == () and later.fragment.parent_id == first.fragment.parent_id
    again = store_knowledge(memory, canary, canary)
    assert again.duplicate and again.fragment.id == first.fragment.id
    assert live_count(memory, 1) == 1 and live_count(memory, 2) == 2


def test_related_knowledge_joins_the_branch_and_unrelated_knowledge_gets_its_own_concept(memory):
    first = store_knowledge(memory, FACT_TEXT, FACT)
    related = store_knowledge(memory, "Billing deploys are frozen in the last week of December.",
                              "Billing deploy freeze in late December")
    assert related.created == () and related.placed
    assert related.fragment.parent_id == first.fragment.parent_id
    other = store_knowledge(memory, "The user wants tabs, not spaces, in Go files.",
                            "The user prefers tabs in Go files")
    (concept,) = other.created  # a new concept, under the project's existing topic
    assert concept.depth == 1 and memory.parent(concept.id).id == first.created[0].id
    assert live_count(memory, 0) == 1


def test_storing_with_a_parent_or_as_a_topic_works_as_before(memory):
    topic = store_knowledge(memory, "How billing ships", "Billing deployment", depth=0)
    assert topic.fragment.depth == 0 and topic.created == () and not topic.placed
    concept = store_knowledge(memory, "When deploys may happen", "Deploy window",
                              parent_id=topic.fragment.id, depth=1)
    assert concept.fragment.parent_id == topic.fragment.id


@pytest.mark.parametrize("summary, content", [
    (FACT, "Something else entirely about the same window."),  # the same summary
    ("The billing deploy window is on Thursday at 09:00 UTC", FACT_TEXT),  # cosine 0.996
])
def test_a_near_duplicate_reinforces_the_existing_fragment_instead_of_adding_one(
        memory, clock, summary, content):
    first = store_knowledge(memory, FACT_TEXT, FACT)
    before = live_count(memory)
    clock.advance(days=3)
    again = store_knowledge(memory, content, summary)
    assert again.duplicate and again.fragment.id == first.fragment.id
    assert live_count(memory) == before
    assert memory.get(first.fragment.id).access_count == first.fragment.access_count + 1
    text = stored_text(again, memory.parent(again.fragment.id))
    assert "Already known" in text and first.fragment.id in text


@pytest.mark.parametrize("summary, content", [
    ("The billing deploy window is Friday 09:00 UTC",  # cosine 0.989: a change, not a repeat
     "Agreed in conversation: deploys happen Friday 09:00 UTC."),
    ("The billing deploy window is Thursday 11:00 UTC",
     "Agreed in conversation: deploys happen Thursday 11:00 UTC."),
])
def test_close_vectors_that_say_something_different_are_both_kept(memory, summary, content):
    first = store_knowledge(memory, FACT_TEXT, FACT)
    second = store_knowledge(memory, content, summary)
    assert not second.duplicate and second.fragment.id != first.fragment.id
    assert second.fragment.parent_id == first.fragment.parent_id


def test_a_close_text_whose_words_are_all_known_but_whose_numbers_differ_is_kept(memory):
    # Every word of the new fact, 11:00 included, is in the old one (cosine 0.958), so only
    # the same-numbers guard tells that deploys moved to the rollback hour.
    first = store_knowledge(memory, FACT_TEXT.replace(".", ", rollbacks at 11:00 UTC."), FACT)
    second = store_knowledge(memory, "Agreed in conversation: deploys happen Thursday 11:00 UTC.",
                             "The billing deploy window is Thursday 11:00 UTC")
    assert not second.duplicate and second.fragment.id != first.fragment.id
    assert second.fragment.parent_id == first.fragment.parent_id


def test_the_user_restating_agent_knowledge_confirms_it(memory):
    first = store_knowledge(memory, FACT_TEXT, FACT)
    assert first.fragment.confirmed_at is None
    again = store_knowledge(memory, FACT_TEXT, FACT, source="remember")
    assert again.duplicate and memory.get(first.fragment.id).confirmed_at is not None


def test_extraction_does_not_copy_what_is_already_known(tmp_path, embedder, clock):
    """apply() with the model's output for a later conversation that repeats a fact in other
    words (cosine >= 0.92, same words): the existing fact is reinforced, the new one kept."""
    settings = Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home")
    memory = Memory(settings.db_path, embedder, clock=clock, project="/work/project-a")
    ingestor = Ingestor(settings, None, embedder, clock)  # type: ignore[arg-type] # no LLM: apply() only
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    writer.exchange(1)

    def extraction(*facts: tuple[str, str]) -> Extraction:
        return parse_extraction({"topics": [{
            "name": "Billing deployment", "summary": "How billing ships", "importance": "high",
            "concepts": [{"name": "Deploy window", "summary": "When deploys may happen",
                          "importance": "high",
                          "facts": [{"summary": s, "content": c, "importance": "high",
                                     "basis": "stated"} for s, c in facts]}]}],
            "corrections": [], "relationships": []})

    try:
        delta = read_delta(writer.path, 0)
        ingestor.apply(memory, extraction((FACT, FACT_TEXT)), delta, str(writer.path), "s1")
        (known,) = memory.reader.execute("SELECT id, access_count FROM fragments WHERE depth = 2")
        clock.advance(days=1)
        counts = ingestor.apply(memory, extraction(
            ("The billing deploy window is on Thursday at 09:00 UTC", FACT_TEXT),
            ("Billing deploys are frozen in late December", "No billing deploys in late December.")),
            delta, str(writer.path), "s2")
        facts = memory.reader.execute("SELECT id, summary, access_count FROM fragments "
                                      "WHERE depth = 2 ORDER BY created_at")
        assert [f[1] for f in facts] == [FACT, "Billing deploys are frozen in late December"]
        assert facts[0][0] == known[0] and facts[0][2] == known[1] + 1  # reinforced
        assert counts[0] == 1  # only the new fact was added
    finally:
        memory.close()


# -- one project key per repository -------------------------------------------------------
def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
                        "HOME": str(cwd), "PATH": "/usr/bin:/bin"})


def test_worktrees_and_subfolders_of_one_repository_share_one_project_key(tmp_path):
    repo = tmp_path / "repo"
    (repo / "src" / "deep").mkdir(parents=True)
    git("init", "-q", cwd=repo)
    (repo / "README").write_text("x")
    git("add", "README", cwd=repo)
    git("commit", "-qm", "x", cwd=repo)
    git("worktree", "add", "-q", str(tmp_path / "wt-feature"), cwd=repo)
    (tmp_path / "wt-feature" / "pkg").mkdir()
    key = str(repo.resolve())
    assert project_key(str(repo)) == key
    assert project_key(str(repo / "src" / "deep")) == key
    assert project_key(str(tmp_path / "wt-feature")) == key
    assert project_key(str(tmp_path / "wt-feature" / "pkg") + "/") == key
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "wt-feature")
    assert project_key(str(link)) == key


def test_a_folder_outside_any_repository_is_its_own_key(tmp_path):
    (tmp_path / "plain" / "sub").mkdir(parents=True)
    assert project_key(str(tmp_path / "plain" / "sub")) == str((tmp_path / "plain" / "sub").resolve())


@pytest.mark.parametrize("gitfile", ["", "gitdir:", "nonsense\n", "gitdir: /nonexistent/x\n"])
def test_a_broken_git_file_never_fails(tmp_path, gitfile):
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / ".git").write_text(gitfile)
    assert project_key(str(folder)) == str(folder.resolve())


@pytest.mark.parametrize(("first_text", "heading", "other_text", "other_heading"), [
    # "FTS5 search backend (claude-memory)" is about the search backend: a later fact on the
    # same project (cosine 0.44 with the branch) holds none of its subject's words, so it
    # gets a concept of its own instead of joining on the project's name.
    ("Implemented FTS5 search backend for claude-memory.", "FTS5 search backend (claude-memory)",
     "claude-memory is released under the MIT license.", "claude-memory (MIT)"),
    # "The book club meets monthly" is about the book club: its concept is "Book club", not
    # "Book club meets", whose verb a later fact about another group holds, and which took
    # that fact in as if it named the subject.
    ("The book club meets monthly in the library.", "Book club",
     "The design guild meets every Tuesday after lunch.", None),
], ids=["a name the first fact gave", "a verb read as part of the subject"])
def test_what_a_placed_heading_holds_beyond_its_subject_draws_no_other_fact_in(
        memory, first_text, heading, other_text, other_heading):
    first = store_knowledge(memory, first_text, first_text)
    assert memory.parent(first.fragment.id).summary == heading
    other = store_knowledge(memory, other_text, other_text)
    assert memory.parent(other.fragment.id).id != first.fragment.parent_id
    if other_heading is not None:
        assert memory.parent(other.fragment.id).summary == other_heading
