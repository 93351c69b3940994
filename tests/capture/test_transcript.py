"""The transcript reader against real Claude Code 2.1.197 transcripts, and against the damage
a live, append-only, sometimes-garbled file can show."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lore_plugin.capture.transcript import (
    BASE64_MARKER,
    count_turns_fast,
    project_key,
    read_delta,
    render_turns,
    subagent_paths,
)
from lore_plugin.core.types import Turn
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.197"
if not FIXTURES.is_dir():
    FIXTURES = ROOT.parent / "shared" / "fixtures" / "claude-code-2.1.197"

INTERACTIVE = FIXTURES / "real_2.1.197_interactive_tui.jsonl"
MCP_TOOL_CALL = FIXTURES / "real_2.1.197_p_mode_mcp_tool_call.jsonl"
RESUME_COMPACT = FIXTURES / "real_2.1.197_p_mode_resume_compact_subagent_command.jsonl"
SIDECHAIN = FIXTURES / "real_2.1.197_subagent_sidechain.jsonl"
ALL_FIXTURES = [INTERACTIVE, MCP_TOOL_CALL, RESUME_COMPACT, SIDECHAIN]

FAKE_HELLO_26 = "FAKE_REPLY hello from the fake API (26 tools offered)"


def texts(turns: list[Turn]) -> list[tuple[str, str]]:
    return [(t.role, t.text) for t in turns]


def talk(turns: list[Turn]) -> list[Turn]:
    """The conversation without the tool lines (tools.py's evidence)."""
    return [t for t in turns if t.role != "tool"]


def fixture_lines(path: Path) -> list[bytes]:
    """The complete lines of a fixture, each with its newline."""
    return [line + b"\n" for line in path.read_bytes().split(b"\n")[:-1]]


def line(obj: dict) -> bytes:
    return orjson.dumps(obj) + b"\n"


def user_line(text: str, **extra: object) -> dict:
    return {"type": "user", "message": {"role": "user", "content": text}, "uuid": None, **extra}


def assistant_line(msg_id: str, blocks: list[dict], **extra: object) -> dict:
    message = {"id": msg_id, "role": "assistant", "model": "claude-opus-4-8", "content": blocks}
    return {"type": "assistant", "message": message, **extra}


# --- the real fixtures ---------------------------------------------------------------------


def test_interactive_session_yields_the_prompt_the_reply_and_the_exit_command() -> None:
    delta = read_delta(INTERACTIVE, 0)

    assert texts(delta.turns) == [
        ("user", "hello there"),
        ("assistant", "FAKE_REPLY hello from the fake API (29 tools offered)"),
        ("user", "/exit"),
    ]
    assert delta.bad_lines == 0


def test_interactive_session_drops_the_caveat_and_the_local_command_output() -> None:
    joined = render_turns(read_delta(INTERACTIVE, 0).turns)

    assert "Caveat" not in joined
    assert "Catch you later" not in joined
    assert "MEMTEST_SESSIONSTART_CONTEXT" not in joined  # hook context is an attachment


def test_mcp_tool_call_keeps_the_question_the_call_in_one_line_and_the_final_answer() -> None:
    delta = read_delta(MCP_TOOL_CALL, 0)

    assert texts(delta.turns) == [
        ("user", "what is my favourite colour?"),
        ("tool", "mcp__plugin_memtest_mem__recall favourite colour"),  # its output left out
        (
            "assistant",
            (
                'FAKE_REPLY got tool result: MEMTEST_TOOL_RESULT name=recall args={"query": '
                '"favourite colour"}'
            ),
        ),
    ]
    assert "toolu_" not in render_turns(delta.turns)


def test_resumed_compacted_session_keeps_every_prompt_once_in_file_order() -> None:
    delta = read_delta(RESUME_COMPACT, 0)

    assert [t.text for t in delta.turns if t.role == "user"] == [
        "first prompt",
        "second prompt",
        "/compact keep the colours",
        (
            'delegate: CALL_TOOL Agent {"description":"recall colour","prompt":"CALL_TOOL '
            'mcp__plugin_memtest_mem__recall {\\"query\\":\\"colour\\"}","subagent_type":'
            '"general-purpose"}'
        ),
        "/memtest:recall colours",
        "continue prompt",
    ]
    assert [t.text for t in delta.turns if t.role == "assistant"][:2] == [FAKE_HELLO_26] * 2
    assert len(talk(delta.turns)) == 11


def test_compact_summary_and_meta_lines_are_not_turns() -> None:
    joined = render_turns(read_delta(RESUME_COMPACT, 0).turns)

    assert "This session is being continued" not in joined  # isCompactSummary
    assert "Continue from where you left off" not in joined  # isMeta
    assert "Use the recall tool to search memory for" not in joined  # slash command expansion
    assert "No response requested" not in joined  # <synthetic> assistant message
    assert "Compacted (ctrl+o" not in joined  # local-command-stdout


def test_slash_commands_read_as_commands_whatever_the_tag_order() -> None:
    users = {t.text for t in read_delta(RESUME_COMPACT, 0).turns if t.role == "user"}

    assert "/compact keep the colours" in users  # <command-name> first
    assert "/memtest:recall colours" in users  # <command-message> first


def test_turns_carry_timestamp_uuid_and_sidechain_flag() -> None:
    first, reply = talk(read_delta(MCP_TOOL_CALL, 0).turns)

    assert first.uuid == "4f5a8d1e-1718-4af6-8cf2-9cbe6316b946"
    assert first.timestamp == "2026-11-21T23:54:10.948Z"
    assert reply.uuid == "ab6c9f19-14a9-4340-b814-425384602c27"
    assert not first.is_sidechain and not reply.is_sidechain


def test_delta_reports_cwd_session_and_offsets() -> None:
    delta = read_delta(RESUME_COMPACT, 0)

    assert delta.cwd == "/tmp/ccresearch/multi/proj"
    assert delta.session_id == "11111111-2222-4333-8444-555555555555"
    assert (delta.start_offset, delta.end_offset) == (0, RESUME_COMPACT.stat().st_size)
    assert delta.lines == 54
    assert not delta.truncated and not delta.missing


def test_subagent_transcript_turns_are_marked_sidechain() -> None:
    delta = read_delta(SIDECHAIN, 0)

    assert texts(talk(delta.turns)) == [
        ("user", 'CALL_TOOL mcp__plugin_memtest_mem__recall {"query":"colour"}'),
        (
            "assistant",
            'FAKE_REPLY got tool result: MEMTEST_TOOL_RESULT name=recall args={"query": "colour"}',
        ),
    ]
    assert all(t.is_sidechain for t in delta.turns)


def test_subagent_paths_finds_the_session_agents_sorted_and_readable(tmp_path: Path) -> None:
    session = "11111111-2222-4333-8444-555555555555"
    main = tmp_path / "-tmp-ccresearch-multi-proj" / f"{session}.jsonl"
    agents = main.parent / session / "subagents"
    agents.mkdir(parents=True)
    shutil.copy(RESUME_COMPACT, main)
    shutil.copy(SIDECHAIN, agents / "agent-acc2e5a41e24239fa.jsonl")
    shutil.copy(SIDECHAIN, agents / "agent-0a1b2c3d4e5f60718.jsonl")
    shutil.copy(
        FIXTURES / "real_2.1.197_subagent.meta.json", agents / "agent-acc2e5a41e24239fa.meta.json"
    )
    (agents / "notes.jsonl").write_text("{}\n")

    paths = subagent_paths(main)

    assert [p.name for p in paths] == [
        "agent-0a1b2c3d4e5f60718.jsonl",
        "agent-acc2e5a41e24239fa.jsonl",
    ]
    assert all(t.is_sidechain for p in paths for t in read_delta(p, 0).turns)


def test_subagent_paths_is_empty_when_a_session_has_no_subagents(tmp_path: Path) -> None:
    main = tmp_path / "s.jsonl"
    shutil.copy(INTERACTIVE, main)

    assert subagent_paths(main) == []
    assert subagent_paths(tmp_path / "never-written.jsonl") == []


# --- shapes the fixtures do not show --------------------------------------------------------


def test_assistant_message_split_over_several_lines_becomes_one_turn(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    blocks = [
        {
            "type": "thinking",
            "thinking": "the user wants a plan",
            "signature": "EqQBCkYIBRgCKkA" * 40,
        },
        {"type": "text", "text": "First, migrate the schema."},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
        {"type": "text", "text": "Then backfill the watermarks."},
    ]
    lines = [line(user_line("plan the migration", uuid="u1"))]
    for i, block in enumerate(blocks):
        lines.append(line(assistant_line("msg_split", [block], uuid=f"a{i}", timestamp=f"t{i}")))
        if block["type"] == "tool_use":
            result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]
            lines.append(line({"type": "user", "message": {"role": "user", "content": result}}))
    path.write_bytes(b"".join(lines))

    turns = talk(read_delta(path, 0).turns)

    assert texts(turns) == [
        ("user", "plan the migration"),
        ("assistant", "First, migrate the schema.\n\nThen backfill the watermarks."),
    ]
    assert turns[1].uuid == "a1" and turns[1].timestamp == "t1"  # the first line with text
    assert "EqQBCkYI" not in render_turns(turns) and "the user wants a plan" not in render_turns(
        turns
    )


def test_images_and_long_base64_runs_never_reach_the_turn_text(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    payload = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" * 40
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": payload},
    }
    text = {
        "type": "text",
        "text": f"what is in this screenshot? blob: {payload} and data:image/png;base64,{payload}",
    }
    path.write_bytes(line({"type": "user", "message": {"role": "user", "content": [image, text]}}))

    (turn,) = read_delta(path, 0).turns

    assert "iVBORw0KGgo" not in turn.text
    assert turn.text.startswith("what is in this screenshot? blob: " + BASE64_MARKER)


def test_ordinary_long_words_and_hashes_are_not_mistaken_for_base64(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    kept = (
        "commit 1c002dd4b536e7479fe34593e72e6c6c1819e53b touched "
        "/usr/lib/python3/site-packages/averyveryveryveryveryveryveryveryveryveryverylongpackagename/"
        "and/some/more/path/segments/that/go/on/and/on/and/on/for/a/while/module.py"
    )
    path.write_bytes(line(user_line(kept)))

    assert read_delta(path, 0).turns[0].text == kept


def test_system_reminders_and_command_output_are_stripped_from_human_text(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    noisy = (
        "<system-reminder>The TodoWrite tool hasn't been used</system-reminder>"
        "Please fix the login bug.<local-command-stdout>ok</local-command-stdout>"
        "<bash-input>git status</bash-input><bash-stdout>clean</bash-stdout><bash-stderr></bash-stderr>"
    )
    path.write_bytes(line(user_line(noisy)) + line(user_line("<system-reminder>only noise")))

    assert texts(read_delta(path, 0).turns) == [("user", "Please fix the login bug.! git status")]


def test_interrupt_notices_synthetic_replies_and_api_errors_are_not_turns(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    interrupted = [{"type": "text", "text": "[Request interrupted by user for tool use]"}]
    synthetic = assistant_line("m1", [{"type": "text", "text": "No response requested."}])
    synthetic["message"]["model"] = "<synthetic>"
    api_error = assistant_line(
        "m2", [{"type": "text", "text": "API Error: 529"}], isApiErrorMessage=True
    )
    path.write_bytes(
        line({"type": "user", "message": {"role": "user", "content": interrupted}})
        + line(user_line("[Request interrupted by user]"))
        + line(synthetic)
        + line(api_error)
    )

    assert read_delta(path, 0).turns == []


def test_a_prompt_queued_mid_turn_is_a_user_turn_but_a_task_notification_is_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    queued = {"type": "queued_command", "prompt": "also check the logs", "commandMode": "prompt"}
    note = {
        "type": "queued_command",
        "prompt": "<task-notification><status>completed</status></task-notification>",
        "commandMode": "task-notification",
    }
    path.write_bytes(
        line({"type": "attachment", "attachment": queued, "uuid": "q1"})
        + line({"type": "attachment", "attachment": note, "uuid": "q2"})
    )

    assert texts(read_delta(path, 0).turns) == [("user", "also check the logs")]
    assert count_turns_fast(path, 0) == 1


# --- offsets, partial lines and resumption ----------------------------------------------------


def test_resuming_at_an_offset_yields_only_the_new_turns(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = fixture_lines(RESUME_COMPACT)
    path.write_bytes(b"".join(lines[:16]))
    first = read_delta(path, 0)
    with open(path, "ab") as fh:
        fh.write(b"".join(lines[16:]))

    second = read_delta(path, first.end_offset)

    assert [t.text for t in first.turns] == [
        "first prompt",
        FAKE_HELLO_26,
        "second prompt",
        FAKE_HELLO_26,
    ]
    assert second.start_offset == first.end_offset
    assert second.turns[0].text == "/compact keep the colours"
    assert first.turns + second.turns == read_delta(RESUME_COMPACT, 0).turns


@pytest.mark.parametrize("fixture", ALL_FIXTURES, ids=lambda p: p.stem)
def test_reading_one_line_at_a_time_gives_the_same_turns_as_one_read(fixture: Path) -> None:
    offset, turns = 0, []
    while True:
        delta = read_delta(fixture, offset, max_bytes=1)
        if delta.end_offset == offset:
            break
        assert delta.lines == 1
        turns += delta.turns
        offset = delta.end_offset

    assert offset == fixture.stat().st_size
    assert turns == read_delta(fixture, 0).turns


def test_max_bytes_stops_at_the_last_line_boundary_within_the_budget() -> None:
    sizes = [len(x) for x in fixture_lines(RESUME_COMPACT)]
    budget = sum(sizes[:5]) + 10

    delta = read_delta(RESUME_COMPACT, 0, max_bytes=budget)

    assert (delta.lines, delta.end_offset) == (5, sum(sizes[:5]))


def test_an_incomplete_final_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    done, pending = line(user_line("first")), line(user_line("second"))
    path.write_bytes(done + pending[:-1])

    before = read_delta(path, 0)
    assert [t.text for t in before.turns] == ["first"]
    assert before.end_offset == len(done)
    assert count_turns_fast(path, 0) == 1
    assert read_delta(path, before.end_offset, max_bytes=1).end_offset == len(done)

    with open(path, "ab") as fh:
        fh.write(b"\n")
    after = read_delta(path, before.end_offset)
    assert [t.text for t in after.turns] == ["second"]
    assert after.end_offset == len(done) + len(pending)


def test_line_separator_u2028_inside_text_does_not_split_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    text = "use the paragraph\u2028separator\u2029and the next line\x85too"
    raw = line(user_line(text))
    assert "\u2028".encode() in raw  # written raw, as Claude Code does
    path.write_bytes(raw + line(user_line("after")))

    delta = read_delta(path, 0)

    assert [t.text for t in delta.turns] == [text, "after"]
    assert (delta.lines, delta.bad_lines) == (2, 0)


def test_a_file_shorter_than_the_offset_is_reported_truncated(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    shutil.copy(INTERACTIVE, path)
    offset = path.stat().st_size
    path.write_bytes(line(user_line("a new file in its place")))

    delta = read_delta(path, offset)

    assert delta.truncated and not delta.missing
    assert (delta.turns, delta.end_offset) == ([], offset)
    assert count_turns_fast(path, offset) == 0


def test_a_vanished_file_is_reported_missing(tmp_path: Path) -> None:
    delta = read_delta(tmp_path / "gone.jsonl", 1234)

    assert delta.missing and not delta.truncated
    assert (delta.turns, delta.start_offset, delta.end_offset) == ([], 1234, 1234)
    assert count_turns_fast(tmp_path / "gone.jsonl", 0) == 0


def test_reading_at_the_end_of_the_file_yields_nothing() -> None:
    size = INTERACTIVE.stat().st_size

    delta = read_delta(INTERACTIVE, size)

    assert (delta.turns, delta.lines, delta.end_offset) == ([], 0, size)


def test_a_negative_offset_is_a_caller_bug() -> None:
    with pytest.raises(ValueError):
        read_delta(INTERACTIVE, -1)


# --- garbage ---------------------------------------------------------------------------------


GARBAGE = [
    b'{"type":"user","message":{"role":"user","content":"trunc',  # truncated JSON
    b"\x00\x01\xff\xfe binary \x89PNG\r\n\x1a",  # random bytes (contains a \n of its own)
    b'{"type":"user","message":{"role":"user","content":"bad \xff\xfe utf8"}}',
    b"[1, 2, 3]",
    b'"just a string"',
    b"null",
    b"   ",
    b"",
    b'{"type":"hologram","message":{"content":"from the future"}}',
    b'{"type":"user","message":"not an object"}',
    b'{"type":"user","message":{"content":[1, null, {"type":"text","text":5}]}}',
    b'{"type":"assistant","message":{"id":7,"content":{"type":"text"}}}',
    b'{"type":"attachment","attachment":{"type":"queued_command","prompt":42}}',
    b'{"type":"user","isMeta":"yes","message":{"content":"meta as a string"}}',
]


def test_garbage_lines_never_stop_reading(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = fixture_lines(MCP_TOOL_CALL)
    path.write_bytes(good[4] + b"\n".join(GARBAGE) + b"\n" + b"".join(good[8:]))

    delta = read_delta(path, 0)

    assert delta.turns[0].text == "what is my favourite colour?"
    assert delta.turns[-1].role == "assistant"
    assert delta.end_offset == path.stat().st_size
    # truncated JSON, the two halves of the binary line, bad UTF-8, and three non-objects
    assert delta.bad_lines == 7


def test_a_ten_megabyte_line_is_consumed_even_with_a_small_budget(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    huge_garbage = b"{" + b"x" * (10 * 1024 * 1024) + b"\n"
    huge_valid = line(user_line("look at this log: " + "log line. " * 1_000_000))
    path.write_bytes(huge_garbage + huge_valid + line(user_line("after the big ones")))

    first = read_delta(path, 0, max_bytes=64 * 1024)
    second = read_delta(path, first.end_offset, max_bytes=64 * 1024)
    third = read_delta(path, second.end_offset, max_bytes=64 * 1024)

    assert (first.lines, first.bad_lines, first.end_offset) == (1, 1, len(huge_garbage))
    assert second.turns[0].text.startswith("look at this log: log line.")
    assert [t.text for t in third.turns] == ["after the big ones"]
    assert count_turns_fast(path, 0) == 2


def test_unknown_line_types_are_skipped_without_counting_as_bad(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        line({"type": "ai-title", "title": "x"})
        + line({"type": "summary", "summary": "s", "leafUuid": "u"})
        + line({"type": "progress", "data": {"type": "hook_progress"}})
        + line(user_line("real question"))
    )

    delta = read_delta(path, 0)

    assert ([t.text for t in delta.turns], delta.bad_lines) == (["real question"], 0)


# --- count_turns_fast ------------------------------------------------------------------------


def _user_turns(path: Path, offset: int) -> int:
    return sum(1 for t in read_delta(path, offset).turns if t.role == "user")


@pytest.mark.parametrize("fixture", ALL_FIXTURES, ids=lambda p: p.stem)
def test_count_turns_fast_agrees_with_read_delta_from_every_line_boundary(fixture: Path) -> None:
    offset = 0
    for raw in [b"", *fixture_lines(fixture)]:
        offset += len(raw)
        assert count_turns_fast(fixture, offset) == _user_turns(fixture, offset), offset


def test_count_turns_fast_reads_json_written_with_spaces_too(tmp_path: Path) -> None:
    import json

    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps(user_line("spaced out")) + "\n" + json.dumps(user_line("twice")) + "\n"
    )

    assert count_turns_fast(path, 0) == _user_turns(path, 0) == 2


def test_count_turns_fast_skips_tool_results_in_a_large_transcript(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    body = "file content line\n" * 3000
    result = [{"type": "tool_result", "tool_use_id": "toolu_x", "content": body}]
    tool_line = line({"type": "user", "message": {"role": "user", "content": result}})
    reply = line(assistant_line("m", [{"type": "text", "text": "done"}]))
    with open(path, "wb") as fh:
        fh.writelines(line(user_line(f"request {i}")) + tool_line * 3 + reply for i in range(100))

    assert path.stat().st_size > 15_000_000
    assert count_turns_fast(path, 0) == 100


# --- helpers ---------------------------------------------------------------------------------


def test_project_key_is_the_resolved_absolute_path_without_a_trailing_slash(tmp_path: Path) -> None:
    real = tmp_path / "proj"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)

    assert project_key(f"{real}/") == str(real.resolve())
    assert project_key(f"{link}/sub/..") == str(real.resolve())
    assert project_key("/") == "/"
    assert project_key("~") == os.path.realpath(os.path.expanduser("~"))


def test_render_turns_labels_the_human_the_assistant_and_subagents() -> None:
    turns = [
        Turn("user", "why is the build red?"),
        Turn("assistant", "A flaky test."),
        Turn("user", "Find the flaky test", is_sidechain=True),
        Turn("assistant", "test_sync.py", is_sidechain=True),
    ]

    assert render_turns(turns) == (
        "User: why is the build red?\nAssistant: A flaky test.\n"
        "Subagent task: Find the flaky test\nSubagent: test_sync.py"
    )
    assert render_turns([]) == ""


# --- fuzz ------------------------------------------------------------------------------------

_REAL_LINES = [raw for f in ALL_FIXTURES for raw in fixture_lines(f)]
_chunks = st.one_of(
    st.binary(max_size=200),
    st.sampled_from(_REAL_LINES),
    st.sampled_from(_REAL_LINES).map(lambda raw: raw[: len(raw) // 2]),
    st.sampled_from(GARBAGE),
    st.just(b"\n"),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(chunks=st.lists(_chunks, max_size=25), max_bytes=st.one_of(st.none(), st.integers(0, 4000)))
def test_random_bytes_never_make_the_reader_raise(
    tmp_path: Path, chunks: list[bytes], max_bytes: int | None
) -> None:
    path = tmp_path / "fuzz.jsonl"
    data = b"".join(chunks)
    path.write_bytes(data)

    offset = 0
    while True:
        delta = read_delta(path, offset, max_bytes=max_bytes)
        assert delta.end_offset >= offset
        assert delta.end_offset == offset or data[delta.end_offset - 1 : delta.end_offset] == b"\n"
        if delta.end_offset == offset:
            break
        offset = delta.end_offset
    assert offset == data.rfind(b"\n") + 1
    assert count_turns_fast(path, 0) >= _user_turns(path, 0)  # >: a line repeated verbatim
