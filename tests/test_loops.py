"""The learning loops of issue 17, through real ingestion (real transcripts in Claude Code's JSONL
shape, the anthropic SDK against the fake API, the real embedding model, a real database):
the rule of three (failures recurring in three sessions become a pattern the brief shows in
their projects) and implicit usefulness (recalled fragments the assistant used gain more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.brief import session_brief
from lore_plugin.config import Settings
from lore_plugin.consolidate import consolidate
from lore_plugin.ingest import Ingestor
from lore_plugin.llm import pick_llm
from lore_plugin.patterns import kind_key
from lore_plugin.store import Store
from tests.fake_anthropic import FakeAnthropic
from tests.knowledge_api import KnowledgeModel
from tests.transcripts import TranscriptWriter

PROJECT_A, PROJECT_B, PROJECT_C = "/work/project-a", "/work/project-b", "/work/project-c"
IMPORT_FIX = "run pytest from the repository root after pip install -e ."
# One breakage told three ways (as three sessions' extractions would word it), each with
# its own spelling of the error kind.
IMPORT_FAILURES = [
    ("pytest could not import lore_plugin: No module named 'lore_plugin'",
     "ModuleNotFoundError", "set PYTHONPATH=. before running pytest"),
    ("running the tests failed because lore_plugin was not importable",
     "module not found error", None),
    ("tests crash on import: ModuleNotFoundError for lore_plugin",
     "builtins.ModuleNotFoundError", IMPORT_FIX),
]
PORT_FAILURE = ("the dev server could not bind port 8080, already in use", "EADDRINUSE",
                "kill the stale server process")


@pytest.fixture()
def model():
    return KnowledgeModel()


@pytest.fixture()
def api(model):
    with FakeAnthropic(model) as server:
        yield server


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home", batch_bytes=64_000,
                    retry_backoff_secs=0.0, park_after=3, max_requests_per_hour=10_000)


@pytest.fixture()
def ingestor(settings, api, embedder, clock):
    llm = pick_llm(settings, env={"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url})
    ingestor = Ingestor(settings, llm, embedder, clock)
    yield ingestor
    ingestor.close()


def session_with_failure(tmp_path: Path, ingestor: Ingestor, model: KnowledgeModel, n: int,
                         cwd: str, failure: tuple[str, str, str | None]) -> None:
    """One session in `cwd` in which something broke and was fixed, ingested for real."""
    what, kind, fix = failure
    writer = TranscriptWriter(tmp_path / f"s{n}.jsonl", cwd=cwd,
                              session=f"00000000-0000-4000-8000-{n:012d}")
    writer.user(f"The tests fail: {what}. Can you fix it?")
    writer.assistant(f"The error is {kind}. Fixed it: {fix or 'worked around it for now'}.")
    model.extra = {"failures": [{"what": what, "kind": kind, **({"fix": fix} if fix else {})}]}
    report = ingestor.ingest(writer.path)
    assert report.batches == 1 and report.failed is None


def test_error_kinds_normalise_to_one_key():
    assert {kind_key(k) for _, k, _ in IMPORT_FAILURES} == {"module not found"}
    assert kind_key("EADDRINUSE") == "eaddrinuse"
    assert kind_key("Error") == "error"  # never empty
    assert kind_key("exit code 2") == "exit code 2"


def test_a_failure_in_three_sessions_becomes_a_pattern_shown_only_where_it_occurred(
        tmp_path, settings, ingestor, model, clock):
    for n, (failure, cwd) in enumerate(zip(IMPORT_FAILURES, (PROJECT_A, PROJECT_A, PROJECT_B))):
        session_with_failure(tmp_path, ingestor, model, n, cwd, failure)
    # The port clash happens twice only: no pattern.
    for n in (10, 11):
        session_with_failure(tmp_path, ingestor, model, n, PROJECT_C, PORT_FAILURE)
    # The same error kind for a different breakage is a different lesson.
    session_with_failure(tmp_path, ingestor, model, 12, PROJECT_C, (
        "the Docker build failed: no module named numpy in the slim image",
        "ModuleNotFoundError", "add numpy to the image's requirements"))
    store = Store(settings.db_path)
    try:
        assert len(store.failure_records()) == 6
        report = consolidate(settings, store, clock)
        assert report["patterns"] == 1
    finally:
        store.close()
    for cwd in (PROJECT_A, PROJECT_B):
        brief = session_brief(settings, cwd) or ""
        assert "Recurring in this project:" in brief
        assert "recurring (3 sessions)" in brief
        assert f"what fixed it: {IMPORT_FIX}" in brief  # the latest fix that worked
        recalled_block = brief[brief.index("<recalled-notes>"):brief.index("</recalled-notes>")]
        assert "recurring (3 sessions)" in recalled_block  # framed as recalled data
    for cwd in (PROJECT_C, "/work/elsewhere"):
        assert "recurring" not in (session_brief(settings, cwd) or "")


def test_two_sessions_make_no_pattern_and_a_third_later_does(tmp_path, settings, ingestor, model,
                                                             clock):
    for n in range(2):
        session_with_failure(tmp_path, ingestor, model, n, PROJECT_A, IMPORT_FAILURES[n])
    assert ingestor.ingest(tmp_path / "s1.jsonl").batches == 0  # read once, recorded once
    store = Store(settings.db_path)
    try:
        assert len(store.failure_records()) == 2
        assert consolidate(settings, store, clock)["patterns"] == 0
        assert "recurring" not in (session_brief(settings, PROJECT_A) or "")
        session_with_failure(tmp_path, ingestor, model, 2, PROJECT_A, IMPORT_FAILURES[2])
        assert consolidate(settings, store, clock, dry_run=True)["patterns"] == 1
        assert store.failure_patterns(PROJECT_A) == []  # a dry run writes nothing
        assert consolidate(settings, store, clock)["patterns"] == 1
        assert "recurring (3 sessions)" in (session_brief(settings, PROJECT_A) or "")
    finally:
        store.close()


def test_one_session_repeating_a_failure_is_not_three_sessions(tmp_path, settings, ingestor, model,
                                                               clock):
    writer = TranscriptWriter(tmp_path / "one.jsonl", cwd=PROJECT_A)
    for what, kind, fix in IMPORT_FAILURES:
        writer.user(f"The tests fail again: {what}.")
        writer.assistant(f"Fixed: {fix}.")
        model.extra = {"failures": [{"what": what, "kind": kind}]}
        ingestor.ingest(writer.path)
    store = Store(settings.db_path)
    try:
        assert len(store.failure_records()) == 3
        assert consolidate(settings, store, clock)["patterns"] == 0
    finally:
        store.close()
