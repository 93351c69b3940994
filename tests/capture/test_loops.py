"""The learning loops of issue 17, through real ingestion (real transcripts in Claude Code's JSONL
shape, the anthropic SDK against the fake API, the real embedding model, a real database):
the rule of three (failures recurring in three sessions become a pattern the brief shows in
their projects) and implicit usefulness (recalled fragments the assistant used gain more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.capture.ingest import Ingestor
from lore_plugin.capture.patterns import kind_key
from lore_plugin.consolidation.cycle import consolidate
from lore_plugin.core.config import Settings
from lore_plugin.hooks.brief import session_brief
from lore_plugin.store import Store
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
def batch_bytes() -> int:
    return 64_000  # each session in one batch


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


# -- implicit usefulness ------------------------------------------------------------------------
USED = "Deploys happen on Tuesday at 14:00 UTC"
IGNORED = "Deploy freezes start two weeks before the quarterly audit"
QUERY_TOOL = "mcp__plugin_lore_memory__query_memory"


@pytest.fixture()
def recall_memory(settings, embedder, clock):
    from lore_plugin.recall.memory import Memory

    memory = Memory(settings.db_path, embedder, clock)
    topic = memory.store("How the team ships to production", "Deployment", depth=0)
    concept = memory.store("When deploys may happen", "Deploy window", parent_id=topic.id, depth=1)
    used = memory.store(USED, USED, parent_id=concept.id)
    ignored = memory.store(IGNORED, IGNORED, parent_id=concept.id)
    yield memory, used.id, ignored.id
    memory.close()


def recall_turn(writer: TranscriptWriter, memory, question: str, topic: str, reply: str) -> str:
    """One turn as Claude Code records it: the user asks, the assistant calls query_memory, the
    tool answers with what the real Lore server would send (the same Memory and render calls,
    reinforcing as it does), and the assistant replies. Returns the tool's answer text."""
    from lore_plugin.recall import render

    recall = memory.query(topic, depth=2)
    answer = render.recalled(render.recall_text(topic, 2, recall.fragments, recall.keyword_only))
    writer.user(question)
    tool_line = writer._base("assistant")
    tool_line["message"] = {"id": "msg_q" + tool_line["uuid"][:8], "type": "message",
                            "role": "assistant", "model": "claude-opus-4-8", "content": [
                                {"type": "tool_use", "id": "toolu_" + tool_line["uuid"][:8],
                                 "name": QUERY_TOOL, "input": {"topic": topic, "depth": 2}}]}
    writer.append(tool_line)
    result = writer._base("user")
    result["message"] = {"role": "user", "content": [
        {"tool_use_id": "toolu_" + tool_line["uuid"][:8], "type": "tool_result",
         "content": [{"type": "text", "text": answer}]}]}
    result["toolUseResult"] = [{"type": "text", "text": answer}]
    writer.append(result)
    writer.assistant(reply, tool=False)
    return answer


def state(settings: Settings, fid: str):
    store = Store(settings.db_path)
    try:
        return store.get(fid), store.recall_use(fid)
    finally:
        store.close()


def test_the_recalled_fragment_the_assistant_used_gains_more_than_the_one_it_ignored(
        tmp_path, settings, ingestor, recall_memory, clock):
    from lore_plugin.core import relevance as rel

    memory, used, ignored = recall_memory
    writer = TranscriptWriter(tmp_path / "recall.jsonl")
    answer = recall_turn(writer, memory, "When can I deploy the billing service?",
                         "deploy window", "You can deploy on Tuesday at 14:00 UTC.")
    assert f"[{used[:12]}]" in answer and f"[{ignored[:12]}]" in answer  # both were returned
    before_used, before_ignored = state(settings, used)[0], state(settings, ignored)[0]
    assert before_used.access_count == before_ignored.access_count == 1  # the recall itself
    clock.advance(seconds=60)
    assert ingestor.ingest(writer.path).failed is None
    (a, a_use), (b, b_use) = state(settings, used), state(settings, ignored)
    assert a_use == (1, 1, 0) and b_use == (1, 0, 1)
    assert a.access_count == 2 and b.access_count == 1  # a use is a second reinforcement
    later = clock() + 30 * rel.DAY
    assert (rel.relevance(a.importance, a.access_count, a.decay_rate, a.last_reinforced, later)
            > rel.relevance(b.importance, b.access_count, b.decay_rate, b.last_reinforced, later))
    # Ingesting the transcript again judges nothing twice.
    assert ingestor.ingest(writer.path).batches == 0
    assert state(settings, used)[1] == (1, 1, 0)


def test_a_fragment_returned_and_ignored_many_times_loses_relevance(
        tmp_path, settings, ingestor, recall_memory, clock):
    from lore_plugin.core import relevance as rel

    memory, used, ignored = recall_memory
    writer = TranscriptWriter(tmp_path / "recall.jsonl")
    recall_turn(writer, memory, "When can I deploy?", "deploy window",
                "Tuesday at 14:00 UTC is the window.")
    clock.advance(seconds=60)
    ingestor.ingest(writer.path)
    after_one = state(settings, ignored)[0]
    for n in range(7):
        clock.advance(seconds=3600)
        recall_turn(writer, memory, f"Can I deploy hotfix {n} now?", "deploy window",
                    "Only on Tuesday at 14:00 UTC.")
    clock.advance(seconds=60)
    assert ingestor.ingest(writer.path).failed is None
    b, b_use = state(settings, ignored)
    a = state(settings, used)[0]
    assert b_use == (8, 0, 8)
    assert b.decay_rate > after_one.decay_rate * 2  # decay sped up past the grace
    later = clock() + 30 * rel.DAY

    def score(f):
        return rel.relevance(f.importance, f.access_count, f.decay_rate, f.last_reinforced, later)

    assert score(b) < score(after_one)  # more recalls, ignored, left it weaker, not stronger
    never = rel.relevance(b.importance, 0, rel.decay_rate_for(b.importance), b.created_at, later)
    assert score(b) < never  # below a fragment of its importance never recalled at all
    assert score(a) > score(after_one)
    # Consolidation's relevance phase uses the same state: its stored score agrees.
    clock.advance(days=30)
    store = Store(settings.db_path)
    try:
        consolidate(settings, store, clock)
        rows = dict(store.execute("SELECT id, relevance_score FROM fragments"))
    finally:
        store.close()
    assert rows[ignored] < rows[used]
    assert rows[ignored] == pytest.approx(rel.relevance(
        b.importance, b.access_count, b.decay_rate, b.last_reinforced, clock()), abs=1e-3)


FIXTURE_MCP = "real_2.1.197_p_mode_mcp_tool_call.jsonl"


def fixture_with_lore_recall(tmp_path: Path, via: str, answer: str, reply: str) -> Path:
    """The real recorded `claude -p` session with an MCP tool call and a UserPromptSubmit
    hook context, its test plugin's texts swapped for Lore's: `via` "tool" makes the tool call
    a query_memory answered with `answer`, "hook" puts `answer` in the hook's
    additionalContext; the assistant's final reply becomes `reply`."""
    import json

    from tests.conftest import FIXTURES

    out = tmp_path / "fixture.jsonl"
    lines = []
    for raw in (FIXTURES / FIXTURE_MCP).read_text().splitlines():
        obj = json.loads(raw)
        att = obj.get("attachment") or {}
        message = obj.get("message") or {}
        content = message.get("content")
        if via == "hook" and att.get("type") == "hook_additional_context" \
                and att.get("hookEvent") == "UserPromptSubmit":
            att["content"] = [answer]
        if obj.get("type") == "assistant" and isinstance(content, list):
            for block in content:
                if via == "tool" and block.get("type") == "tool_use":
                    block["name"], block["input"] = QUERY_TOOL, {"topic": "favourite colour"}
                if block.get("type") == "text":
                    block["text"] = reply
        if via == "tool" and obj.get("type") == "user" and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    block["content"] = [{"type": "text", "text": answer}]
                    obj["toolUseResult"] = block["content"]
        lines.append(json.dumps(obj))
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize("via", ["tool", "hook"])
def test_recalls_in_a_real_claude_code_transcript_are_judged(tmp_path, settings, ingestor, clock,
                                                             embedder, via):
    from lore_plugin.recall import render
    from lore_plugin.recall.memory import Memory

    memory = Memory(settings.db_path, embedder, clock)
    try:
        topic = memory.store("What the user likes", "User preferences", depth=0)
        concept = memory.store("Tastes", "Tastes", parent_id=topic.id, depth=1)
        teal = memory.store("The user's favourite colour is teal", "Favourite colour: teal",
                            parent_id=concept.id)
        helix = memory.store("The user's favourite editor is Helix", "Favourite editor: Helix",
                             parent_id=concept.id)
        answer = render.recalled("\n".join(render.fragment_line(f) for f in (teal, helix)))
    finally:
        memory.close()
    path = fixture_with_lore_recall(tmp_path, via, answer, "Your favourite colour is teal.")
    from lore_plugin.capture.usefulness import recalls_in

    (recall,) = recalls_in(path, 0, path.stat().st_size)
    assert recall.shown == [teal.id[:12], helix.id[:12]]
    assert recall.counted is (via == "tool")  # the prompt hook's injection reinforces nothing
    assert ingestor.ingest(path).failed is None
    assert state(settings, teal.id)[1] == (1, 1, 0)
    assert state(settings, helix.id)[1] == (1, 0, 1)


def test_the_unchanged_fixtures_hold_no_lore_recall(tmp_path):
    from lore_plugin.capture.usefulness import recalls_in
    from tests.conftest import FIXTURES

    for path in sorted(FIXTURES.glob("*.jsonl")):
        assert recalls_in(path, 0, path.stat().st_size) == [], path.name


def test_a_sibling_of_the_same_shape_is_not_counted_used_and_an_id_is():
    from lore_plugin.capture.usefulness import Recall, judge

    texts = {"a" * 12: "billing rule 1 uses value 7", "b" * 12: "billing rule 2 uses value 14",
             "c" * 12: "Invoices are sent on the first working day"}
    recall = Recall(list(texts), '{"topic": "billing rules"}',
                    ["Rule 1 says the value is 7.",
                     '{"fragment_id": "cccccccccccc", "direction": "children"}'])
    assert judge(recall, texts) == ["a" * 12, "c" * 12]
    # Words of the question never count: every result shares them.
    assert judge(Recall(list(texts), "billing value", ["The billing value matters."]), texts) == []


def test_a_slice_not_worth_extracting_still_has_its_recalls_judged(tmp_path, settings, ingestor,
                                                                  recall_memory, api, clock):
    memory, used, ignored = recall_memory
    writer = TranscriptWriter(tmp_path / "recall.jsonl")
    recall_turn(writer, memory, "go ahead", "deploy window", "Tuesday at 14:00 UTC it is.")
    clock.advance(seconds=60)
    report = ingestor.ingest(writer.path)
    assert report.batches == 0 and api.messages == []  # no extraction call was made
    assert state(settings, used)[1] == (1, 1, 0) and state(settings, ignored)[1] == (1, 0, 1)
    assert ingestor.ingest(writer.path).batches == 0
    assert state(settings, used)[1] == (1, 1, 0)  # judged once


def test_an_ignored_injection_never_takes_back_an_access_it_did_not_give():
    from lore_plugin.core import relevance as rel

    state = rel.MemoryState(1, 0.03, 0.0, 0.0)
    assert rel.penalise_ignored(state, rel.IGNORE_GRACE) == state  # within the grace
    tool = rel.penalise_ignored(state, rel.IGNORE_GRACE + 1)
    hook = rel.penalise_ignored(state, rel.IGNORE_GRACE + 1, counted=False)
    assert (tool.access_count, hook.access_count) == (0, 1)
    assert tool.decay_rate == hook.decay_rate == pytest.approx(0.03 * rel.IGNORED_DECAY)
    fast = rel.MemoryState(1, 0.19, 0.0, 0.0)
    assert rel.penalise_ignored(fast, 9).decay_rate == rel.MAX_DECAY  # capped


def test_without_vectors_the_kind_alone_decides_and_sessions_are_counted_once():
    from lore_plugin.capture.patterns import find_patterns

    def record(n: int, session: str, project: str, kind: str, fix: str | None = None) -> tuple:
        return (n, session, project, kind, kind_key(kind), f"broke {n}", fix, None, float(n))

    records = [record(1, "s1", "/p", "TimeoutError", "raise the timeout"),
               record(2, "s1", "/p", "timeout"), record(3, "s2", "/q", "Timeout"),
               record(4, "s3", "/p", "TimeoutException"), record(5, "s4", "/p", "EACCES")]
    assert find_patterns(records) == [("TimeoutException", "broke 4", "raise the timeout", 3,
                                       1.0, 4.0, ["/p", "/q"])]
    assert find_patterns(records[:3]) == []  # two distinct sessions only


def test_the_session_start_hook_shows_the_pattern_in_its_projects_only(
        tmp_path, settings, ingestor, model, clock, isolated_home):
    import json
    import subprocess

    from tests.conftest import PYTHON, python_env

    for n, (failure, cwd) in enumerate(zip(IMPORT_FAILURES, (PROJECT_A, PROJECT_A, PROJECT_B))):
        session_with_failure(tmp_path, ingestor, model, n, cwd, failure)
    store = Store(settings.db_path)
    try:
        assert consolidate(settings, store, clock)["patterns"] == 1
    finally:
        store.close()
    env = python_env(LORE_HOME=str(isolated_home), LORE_DB_PATH=str(settings.db_path),
                     HOME=str(tmp_path / "home"))
    briefs = {}
    for cwd in (PROJECT_B, PROJECT_C):
        hook_input = {"session_id": "11111111-2222-4333-8444-555555555555", "cwd": cwd,
                      "transcript_path": str(tmp_path / "home/.claude/projects/x/t.jsonl"),
                      "hook_event_name": "SessionStart", "source": "startup"}
        proc = subprocess.run([PYTHON, "-m", "lore_plugin.hooks", "session-start"],
                              input=json.dumps(hook_input).encode(), env=env,
                              capture_output=True, timeout=60)
        assert proc.returncode == 0
        out = json.loads(proc.stdout or b"{}").get("hookSpecificOutput", {})
        briefs[cwd] = out.get("additionalContext", "")
    assert f"what fixed it: {IMPORT_FIX}" in briefs[PROJECT_B]
    assert "recurring" not in briefs[PROJECT_C]
