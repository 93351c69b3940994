"""The LLM seam: the anthropic SDK against a fake API over real HTTP, the claude CLI against a
fake script (and once against the real CLI), the budget guard, and backend choice."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from lore_plugin.capture.extract import RECORD_KNOWLEDGE_TOOL, extract_knowledge, parse_extraction
from lore_plugin.core.config import load_settings
from lore_plugin.core.errors import BudgetExceeded, LLMError, LLMUnavailable
from lore_plugin.llm.claude_cli import DISABLE_MARKER, ClaudeCliLLM, parse_cli_output
from lore_plugin.llm.client import (
    AnthropicLLM,
    BudgetGuard,
    FakeLLM,
    GuardedLLM,
    llm_status,
    pick_llm,
)
from tests.conftest import ROOT
from tests.fake_anthropic import (
    FakeAnthropic,
    ScriptedResponder,
    error_reply,
    sse_events,
    structured_output_responder,
    text_reply,
    tool_reply,
)

MODEL = "claude-haiku-4-5"
ANSWER = {
    "topics": [
        {
            "name": "Lore plugin",
            "summary": "memory plugin for Claude Code",
            "importance": "high",
            "concepts": [
                {
                    "name": "storage",
                    "summary": "SQLite via apsw",
                    "importance": "medium",
                    "facts": [{"summary": "Lore stores memory in SQLite", "importance": "high",
                               "basis": "stated", "scope": "project"}],
                }
            ],
        }
    ]
}
TOOL = {"name": "t", "description": "d", "input_schema": {"type": "object"}}


def sdk(api: FakeAnthropic, **kwargs: Any) -> AnthropicLLM:
    kwargs.setdefault("timeout", 5.0)
    kwargs.setdefault("sleep", lambda s: None)
    return AnthropicLLM("sk-test", MODEL, base_url=api.url, **kwargs)


def call(llm: Any) -> dict[str, Any]:
    return llm.call_tool(system="sys", prompt="hello", tool=TOOL)


# --- anthropic SDK over HTTP ------------------------------------------------------------------


def test_the_sdk_request_forces_record_knowledge_and_carries_model_and_topics() -> None:
    with FakeAnthropic(ScriptedResponder([tool_reply("record_knowledge", ANSWER)])) as api:
        got = extract_knowledge(sdk(api), "User: we use SQLite", ["Lore plugin", "Rust async"])
    assert got.topics[0].concepts[0].facts[0].summary == "Lore stores memory in SQLite"
    (request,) = api.messages
    assert request["tool_choice"] == {"type": "tool", "name": "record_knowledge"}
    assert request["model"] == MODEL
    assert "sk-test" in request.headers.get("x-api-key", request.headers.get("authorization", ""))
    assert [t["name"] for t in request["tools"]] == ["record_knowledge"]
    assert "- Rust async" in request["messages"][0]["content"]
    assert "we use SQLite" in request["messages"][0]["content"]
    assert "topic" in request["system"]


def test_a_text_block_before_the_tool_call_is_fine() -> None:
    with FakeAnthropic(ScriptedResponder([tool_reply("t", {"x": 1}, text="Sure.")])) as api:
        assert call(sdk(api)) == {"x": 1}


def test_a_500_then_success_is_retried_after_a_backoff() -> None:
    sleeps: list[float] = []
    replies = [error_reply(500), tool_reply("t", {"ok": True})]
    with FakeAnthropic(ScriptedResponder(replies)) as api:
        assert call(sdk(api, sleep=sleeps.append, backoff=0.5)) == {"ok": True}
    assert len(api.messages) == 2
    assert len(sleeps) == 1 and 0.25 <= sleeps[0] <= 0.5


@pytest.mark.parametrize("status", [429, 529, 503])
def test_rate_limits_and_overload_are_retried_honouring_retry_after(status: int) -> None:
    sleeps: list[float] = []
    replies = [error_reply(status, retry_after=2), tool_reply("t", {"ok": 1})]
    with FakeAnthropic(ScriptedResponder(replies)) as api:
        assert call(sdk(api, sleep=sleeps.append)) == {"ok": 1}
    assert sleeps == [2.0]


def test_a_persistent_server_error_raises_llm_error_after_bounded_attempts() -> None:
    with (
        FakeAnthropic(ScriptedResponder(default=error_reply(500, "boom"))) as api,
        pytest.raises(LLMError, match="500.*boom.*3 attempts"),
    ):
        call(sdk(api, max_retries=2))
    assert len(api.messages) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_a_client_error_is_not_retried(status: int) -> None:
    with (
        FakeAnthropic(ScriptedResponder(default=error_reply(status, "nope"))) as api,
        pytest.raises(LLMError, match=f"refused.*{status}.*nope"),
    ):
        call(sdk(api))
    assert len(api.messages) == 1


def test_a_slow_api_times_out_and_is_retried_then_fails() -> None:
    with FakeAnthropic(ScriptedResponder(default=tool_reply("t", {}, delay=5))) as api:
        started = time.monotonic()
        with pytest.raises(LLMError, match="unreachable.*Timeout.*2 attempts"):
            call(sdk(api, timeout=0.3, max_retries=1))
    assert time.monotonic() - started < 3
    assert len(api.messages) == 2


def test_an_unreachable_api_raises_llm_error() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = AnthropicLLM(
        "k", MODEL, 2.0, max_retries=1, base_url=f"http://127.0.0.1:{port}", sleep=lambda s: None
    )
    with pytest.raises(LLMError, match="unreachable"):
        call(llm)


def test_an_answer_without_the_tool_call_is_an_llm_error() -> None:
    with (
        FakeAnthropic(ScriptedResponder([text_reply("I'd rather chat")])) as api,
        pytest.raises(LLMError, match="without calling t"),
    ):
        call(sdk(api))


def test_an_answer_cut_off_at_max_tokens_is_rejected() -> None:
    cut = replace(tool_reply("t", {"partial": 1}), stop_reason="max_tokens")
    with FakeAnthropic(ScriptedResponder([cut])) as api, pytest.raises(LLMError, match="truncated"):
        call(sdk(api))


def test_a_paid_for_answer_is_in_the_ledger_even_when_it_is_rejected(tmp_path: Path) -> None:
    from lore_plugin.core.config import Settings
    from lore_plugin.llm.usage import Ledger
    from lore_plugin.store import Store

    settings = Settings(db_path=tmp_path / "memory.db", home=tmp_path)
    cut = replace(tool_reply("record_knowledge", {"partial": 1}), stop_reason="max_tokens")
    with FakeAnthropic(ScriptedResponder([cut, tool_reply("record_knowledge", ANSWER)])) as api:
        llm = GuardedLLM(sdk(api), BudgetGuard(tmp_path / "b.json", 10), Ledger(settings), MODEL)
        llm.project = "/work/p"
        with pytest.raises(LLMError, match="truncated"):
            llm.call_tool(system="s", prompt="p", tool=RECORD_KNOWLEDGE_TOOL)
        llm.call_tool(system="s", prompt="p", tool=RECORD_KNOWLEDGE_TOOL)
    store = Store(settings.db_path, readonly=True)
    rows = store.execute("SELECT purpose, project, model, input_tokens FROM llm_usage")
    store.close()
    counted = len(json.dumps(api.messages[0]["messages"])) // 4  # as the fake counts
    assert rows == [("extraction", "/work/p", MODEL, counted)] * 2


def test_a_malformed_tool_input_is_rejected_by_parse_extraction() -> None:
    bad = {"topics": [{"name": "X", "summary": "s", "importance": "urgent", "concepts": []}]}
    with (
        FakeAnthropic(ScriptedResponder([tool_reply("record_knowledge", bad)])) as api,
        pytest.raises(LLMError, match=r"topics\.0\.importance"),
    ):
        extract_knowledge(sdk(api), "User: hi", [])


def test_anthropic_base_url_from_the_environment_is_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeAnthropic(ScriptedResponder([tool_reply("t", {"via": "env"})])) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        llm = AnthropicLLM("k", MODEL, 5.0)
        assert call(llm) == {"via": "env"}


def test_importing_llm_and_extract_does_not_import_anthropic() -> None:
    code = ("import sys, lore_plugin.llm.client, lore_plugin.capture.extract; "
            "print('anthropic' in sys.modules)")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "False"


# --- the fake API's streaming mode, as Claude Code uses it ------------------------------------


def test_streaming_tool_use_follows_the_sse_spec_and_the_sdk_rebuilds_the_block() -> None:
    import anthropic

    data = {"topics": [], "nested": {"list": [1, "two", None]}, "text": 'é\n"q"'}
    replies = [
        tool_reply("record_knowledge", data, text="Here goes."),
        tool_reply("record_knowledge", data),
    ]
    with FakeAnthropic(ScriptedResponder(replies)) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        with client.messages.stream(
            model=MODEL,
            max_tokens=100,
            tools=[RECORD_KNOWLEDGE_TOOL],
            messages=[{"role": "user", "content": "x"}],
        ) as stream:
            final = stream.get_final_message()
        body = {
            "model": MODEL,
            "max_tokens": 100,
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
        }
        raw = httpx.post(f"{api.url}/v1/messages?beta=true", json=body, timeout=5)
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[0].text == "Here goes."
    assert final.content[1].name == "record_knowledge" and final.content[1].input == data
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 0

    assert raw.headers["content-type"].startswith("text/event-stream")
    events = [
        (e.split("\n")[0].removeprefix("event: "), json.loads(e.split("\n")[1][6:]))
        for e in raw.text.strip().split("\n\n")
    ]
    names = [name for name, _ in events]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(payload["type"] == name for name, payload in events)
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and "usage" in start
    block = events[2][1]["content_block"]
    assert block["type"] == "tool_use" and block["input"] == {}
    partial = "".join(p["delta"]["partial_json"] for n, p in events if n == "content_block_delta")
    assert json.loads(partial) == data
    assert events[6][1]["delta"]["stop_reason"] == "tool_use"


def test_sse_events_for_text_use_text_deltas() -> None:
    message = {
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    deltas = [p["delta"] for n, p in sse_events(message) if n == "content_block_delta"]
    assert deltas == [{"type": "text_delta", "text": "hi"}]


def test_the_fake_answers_count_tokens_and_unknown_routes() -> None:
    with FakeAnthropic() as api:
        counted = httpx.post(f"{api.url}/v1/messages/count_tokens", json={"messages": []})
        missing = httpx.get(f"{api.url}/v1/nothing")
    assert counted.status_code == 200 and counted.json()["input_tokens"] >= 1
    assert missing.status_code == 404 and missing.json()["type"] == "error"


# --- claude CLI --------------------------------------------------------------------------------

FAKE_CLAUDE = """\
#!{python}
import json, os, sys, time
record = os.environ["FAKE_CLAUDE_RECORD"]
with open(record, "w") as fh:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ), "stdin": sys.stdin.read(),
               "cwd": os.getcwd()}}, fh)
time.sleep(float(os.environ.get("FAKE_CLAUDE_SLEEP", "0")))
sys.stdout.write(os.environ.get("FAKE_CLAUDE_OUT", ""))
sys.exit(int(os.environ.get("FAKE_CLAUDE_RC", "0")))
"""

pytestmark_posix = pytest.mark.skipif(os.name != "posix", reason="fake claude is a shebang script")


@pytest.fixture()
def fake_claude(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(FAKE_CLAUDE.format(python=sys.executable))
    script.chmod(0o755)
    return script, tmp_path / "record.json"


def run_fake(
    fake: tuple[Path, Path], out: dict[str, Any] | str, timeout: float = 20.0, **env: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    script, record = fake
    stdout = out if isinstance(out, str) else json.dumps(out)
    base = {**os.environ, "FAKE_CLAUDE_RECORD": str(record), "FAKE_CLAUDE_OUT": stdout, **env}
    llm = ClaudeCliLLM(str(script), MODEL, timeout, env=base)
    result = llm.call_tool(
        system="SYSTEM TEXT", prompt="the prompt ✓", tool=RECORD_KNOWLEDGE_TOOL, max_tokens=1234
    )
    return result, json.loads(record.read_text())


def cli_result(**fields: Any) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "result": "", **fields}


@pytestmark_posix
def test_the_cli_gets_the_isolating_flags_the_schema_the_marker_and_the_prompt(
    fake_claude: tuple[Path, Path],
) -> None:
    got, seen = run_fake(fake_claude, cli_result(structured_output=ANSWER))
    assert got == ANSWER
    argv = seen["argv"]
    assert argv[0] == "-p" and "--bare" not in argv
    assert "--no-session-persistence" in argv and "--strict-mcp-config" in argv
    assert argv[argv.index("--output-format") + 1] == "json"
    assert argv[argv.index("--mcp-config") + 1] == '{"mcpServers":{}}'
    assert argv[argv.index("--model") + 1] == MODEL
    assert (
        json.loads(argv[argv.index("--json-schema") + 1]) == RECORD_KNOWLEDGE_TOOL["input_schema"]
    )
    assert argv[argv.index("--system-prompt") + 1].startswith("SYSTEM TEXT")
    assert seen["env"][DISABLE_MARKER] == "1"
    assert seen["env"]["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "1234"
    assert seen["stdin"] == "the prompt ✓"


@pytestmark_posix
def test_the_cli_usage_and_cost_are_read_from_its_json_result(
    fake_claude: tuple[Path, Path],
) -> None:
    from lore_plugin.llm.usage import Usage

    script, record = fake_claude
    usage = {"input_tokens": 12, "cache_read_input_tokens": 100,
             "cache_creation_input_tokens": 30, "output_tokens": 7}
    out = json.dumps(cli_result(structured_output=ANSWER, usage=usage, total_cost_usd=0.0042))
    llm = ClaudeCliLLM(str(script), MODEL, 20, env={**os.environ, "FAKE_CLAUDE_OUT": out,
                                                    "FAKE_CLAUDE_RECORD": str(record)})
    llm.call_tool(system="s", prompt="p", tool=RECORD_KNOWLEDGE_TOOL)
    assert llm.last_usage == Usage(12, 7, 100, 30, 0.0042)
    assert llm.last_usage.total_input == 142 and llm.last_usage.cost(MODEL) == 0.0042


@pytestmark_posix
def test_the_cli_result_text_is_parsed_when_structured_output_is_missing(
    fake_claude: tuple[Path, Path],
) -> None:
    got, _ = run_fake(fake_claude, cli_result(result='```json\n{"topics": []}\n```'))
    assert got == {"topics": []}


@pytestmark_posix
def test_a_cli_error_result_is_an_llm_error(fake_claude: tuple[Path, Path]) -> None:
    out = cli_result(
        subtype="error_max_structured_output_retries",
        is_error=True,
        errors=["Failed to provide valid structured output after 5 attempts"],
    )
    with pytest.raises(LLMError, match="error_max_structured_output_retries.*5 attempts"):
        run_fake(fake_claude, out, FAKE_CLAUDE_RC="1")


@pytestmark_posix
def test_cli_garbage_output_is_an_llm_error(fake_claude: tuple[Path, Path]) -> None:
    with pytest.raises(LLMError, match="exited 3 without a JSON result"):
        run_fake(fake_claude, "Segmentation fault", FAKE_CLAUDE_RC="3")


@pytestmark_posix
def test_a_hanging_cli_is_killed_at_the_timeout(fake_claude: tuple[Path, Path]) -> None:
    started = time.monotonic()
    with pytest.raises(LLMError, match="timed out"):
        run_fake(fake_claude, cli_result(), timeout=0.5, FAKE_CLAUDE_SLEEP="30")
    assert time.monotonic() - started < 5


def test_a_missing_cli_is_an_llm_error(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="cannot run"):
        ClaudeCliLLM(str(tmp_path / "nope"), MODEL, 5).call_tool(system="s", prompt="p", tool=TOOL)


@pytest.mark.parametrize(
    "stdout, expected",
    [
        (
            '{"type":"result","subtype":"success","result":"{}","structured_output":{"a":1}}',
            {"a": 1},
        ),
        ('noise line\n{"subtype":"success","result":"{\\"b\\": 2}"}', {"b": 2}),
    ],
)
def test_parse_cli_output_accepts_real_shapes(stdout: str, expected: dict[str, Any]) -> None:
    assert parse_cli_output(stdout, 0) == expected


@pytest.mark.parametrize(
    "stdout, message",
    [
        (
            '{"subtype":"success","is_error":true,"api_error_status":400,"result":"API Error: 400"}',
            "API Error: 400",
        ),
        ('{"subtype":"success","is_error":false,"result":"I refuse"}', "without structured output"),
        ('{"subtype":"success","result":"[1, 2]"}', "without structured output"),
        ("", "no output"),
    ],
)
def test_parse_cli_output_rejects_failures(stdout: str, message: str) -> None:
    with pytest.raises(LLMError, match=message):
        parse_cli_output(stdout, 1)


@pytest.mark.slow
def test_the_real_claude_cli_extracts_through_a_fake_api(tmp_path: Path) -> None:
    from claude_cli import claude_binary, claude_env

    with FakeAnthropic(structured_output_responder(ANSWER)) as api:
        env = claude_env(
            tmp_path / "home", ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-ant-fake"
        )
        # A user-level hook shows what every hook in the nested session sees (Lore's included).
        marker = tmp_path / "marker.txt"
        hook = {"type": "command", "command": f"printenv {DISABLE_MARKER} > {marker}"}
        settings = {"hooks": {"SessionStart": [{"hooks": [hook]}]}}
        (tmp_path / "home" / ".claude").mkdir(parents=True)
        (tmp_path / "home" / ".claude" / "settings.json").write_text(json.dumps(settings))
        llm = ClaudeCliLLM(str(claude_binary()), MODEL, 90, cwd=tmp_path, env=env)
        got = extract_knowledge(llm, "User: Lore stores memory in SQLite", ["Lore plugin"])
    assert got == parse_extraction(ANSWER)
    assert llm.last_usage is not None and llm.last_usage.output_tokens > 0  # for the ledger
    assert llm.last_usage.total_input > 0
    request = api.messages[0]
    assert request["model"] == MODEL and request["stream"] is True
    assert [t["name"] for t in request["tools"]] == ["StructuredOutput"]
    assert request["tools"][0]["input_schema"] == RECORD_KNOWLEDGE_TOOL["input_schema"]
    assert request["thinking"] == {"type": "disabled"}
    assert "topic name verbatim" in json.dumps(request["system"])
    assert "- Lore plugin" in json.dumps(request["messages"])
    assert marker.read_text().strip() == "1"
    assert not list((tmp_path / "home" / ".claude").rglob("*.jsonl"))  # no transcript to ingest


# --- fake LLM ----------------------------------------------------------------------------------


def test_the_fake_llm_returns_copies_raises_queued_errors_and_records_calls() -> None:
    fake = FakeLLM([{"a": [1]}, LLMError("down"), lambda **kw: {"echo": kw["prompt"]}])
    first = call(fake)
    first["a"].append(2)
    with pytest.raises(LLMError, match="down"):
        call(fake)
    assert call(fake) == {"echo": "hello"}
    with pytest.raises(LLMError, match="no answer left"):
        call(fake)
    assert len(fake.calls) == 4 and fake.calls[0]["tool"] is TOOL


# --- budget guard ------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_budget_refuses_the_call_over_the_cap_until_the_hour_has_passed(tmp_path: Path) -> None:
    clock = Clock(10_000.0)
    guard = BudgetGuard(tmp_path / "budget.json", 3, clock)
    for step in range(3):
        clock.now = 10_000.0 + step * 600
        guard.acquire()
    clock.now = 10_000.0 + 3599
    with pytest.raises(BudgetExceeded, match="3 requests in the last hour"):
        guard.acquire()
    clock.now = 10_000.0 + 3600.5  # the first call has left the window
    guard.acquire()
    with pytest.raises(BudgetExceeded):
        guard.acquire()
    assert guard.used() == 3


def test_a_corrupt_budget_file_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    path.write_text("{not json")
    BudgetGuard(path, 1).acquire()
    assert len(json.loads(path.read_text())) == 1


def test_guarded_llm_does_not_call_the_inner_llm_over_budget(tmp_path: Path) -> None:
    inner = FakeLLM(default={"ok": 1})
    llm = GuardedLLM(inner, BudgetGuard(tmp_path / "b.json", 1))
    assert call(llm) == {"ok": 1}
    with pytest.raises(BudgetExceeded):
        call(llm)
    assert len(inner.calls) == 1


def test_the_budget_holds_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    worker = textwrap.dedent(f"""
        from pathlib import Path
        from lore_plugin.llm.budget import BudgetGuard
        from lore_plugin.core.errors import BudgetExceeded
        guard, won = BudgetGuard(Path({str(path)!r}), 10), 0
        for _ in range(8):
            try:
                guard.acquire()
                won += 1
            except BudgetExceeded:
                pass
        print(won)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", worker], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(4)
    ]
    won = [int(p.communicate(timeout=60)[0]) for p in procs]
    assert sum(won) == 10
    assert len(json.loads(path.read_text())) == 10


# --- choosing the backend ----------------------------------------------------------------------


def no_claude(name: str) -> None:  # like shutil.which when the env names no PATH
    return None


def test_an_api_key_picks_the_sdk_behind_the_budget_guard(tmp_path: Path) -> None:
    settings = load_settings({"LORE_HOME": str(tmp_path)})
    llm = pick_llm(
        settings,
        env={"ANTHROPIC_API_KEY": "sk", "ANTHROPIC_BASE_URL": "http://x"},
        which=lambda *a, **k: "/usr/bin/claude",
    )
    assert isinstance(llm, GuardedLLM) and isinstance(llm.inner, AnthropicLLM)
    assert llm.inner.model == settings.claude_model
    assert llm.guard.path == tmp_path / "llm_budget.json"


def test_without_a_key_the_claude_cli_on_path_is_picked(tmp_path: Path) -> None:
    settings = load_settings({"LORE_HOME": str(tmp_path)})
    seen: list[str | None] = []

    def which(name: str, path: str | None = None) -> str:
        seen.append(path)
        return f"/opt/bin/{name}"

    llm = pick_llm(settings, env={"PATH": "/opt/bin"}, which=which)
    assert isinstance(llm, GuardedLLM) and isinstance(llm.inner, ClaudeCliLLM)
    assert llm.inner.claude_path == "/opt/bin/claude" and seen == ["/opt/bin"]


def test_the_key_variable_named_in_config_is_the_one_used(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[claude]\napi_key_env = "MY_KEY"\n')
    settings = load_settings({"LORE_HOME": str(tmp_path)})
    assert isinstance(pick_llm(settings, env={"MY_KEY": "k"}, which=no_claude).inner, AnthropicLLM)
    with pytest.raises(LLMUnavailable) as caught:
        pick_llm(settings, env={"ANTHROPIC_API_KEY": "k"}, which=no_claude)
    # The configured name is not repeated: people paste the key itself there.
    assert "variable named by config [claude] api_key_env" in str(caught.value)
    assert "MY_KEY" not in str(caught.value)


def test_with_neither_extraction_is_paused_and_status_says_so(tmp_path: Path) -> None:
    settings = load_settings({"LORE_HOME": str(tmp_path)})
    with pytest.raises(LLMUnavailable) as caught:
        pick_llm(settings, env={}, which=no_claude)
    assert str(caught.value) == (
        "extraction is paused: no ANTHROPIC_API_KEY and no `claude` CLI on PATH"
    )
    assert llm_status(settings, env={}, which=no_claude).startswith("paused: no ANTHROPIC_API_KEY")


def test_status_names_the_backend_and_the_budget_used(tmp_path: Path) -> None:
    settings = load_settings({"LORE_HOME": str(tmp_path)})
    BudgetGuard(tmp_path / "llm_budget.json", 5).acquire()
    api = llm_status(settings, env={"ANTHROPIC_API_KEY": "k"}, which=no_claude)
    cli = llm_status(settings, env={}, which=lambda *a, **k: "/usr/bin/claude")
    assert api.startswith("anthropic API") and "1/120 requests" in api
    assert cli.startswith("claude CLI at /usr/bin/claude")


# --- issue 24 §3 and §5: transient errors, cut answers, timeouts, prompt caching --------------


def test_rate_limits_overload_and_timeouts_that_outlast_the_retries_are_transient() -> None:
    from lore_plugin.core.errors import LLMTransient

    for reply in (error_reply(429, retry_after=0), error_reply(529, retry_after=0),
                  tool_reply("t", {}, delay=2)):
        with (FakeAnthropic(ScriptedResponder(default=reply)) as api,
              pytest.raises(LLMTransient)):
            call(sdk(api, timeout=0.3, max_retries=1))
    with (FakeAnthropic(ScriptedResponder(default=error_reply(400, "bad"))) as api,
          pytest.raises(LLMError) as refused):
        call(sdk(api))
    assert not isinstance(refused.value, LLMTransient)  # the request itself was wrong


def test_an_answer_cut_off_at_max_tokens_says_so_by_its_type() -> None:
    from lore_plugin.core.errors import AnswerTruncated

    cut = replace(tool_reply("t", {"partial": 1}), stop_reason="max_tokens")
    with FakeAnthropic(ScriptedResponder([cut])) as api, pytest.raises(AnswerTruncated):
        call(sdk(api))


def test_the_timeout_grows_with_the_output_asked_for() -> None:
    from lore_plugin.core.errors import LLMTransient

    with FakeAnthropic(ScriptedResponder(default=tool_reply("t", {"ok": 1}, delay=0.8))) as api:
        llm = sdk(api, timeout=0.4, max_retries=0)
        with pytest.raises(LLMTransient):
            llm.call_tool(system="s", prompt="p", tool=TOOL, max_tokens=4096)
        assert llm.call_tool(system="s", prompt="p", tool=TOOL, max_tokens=16_384) == {"ok": 1}


def test_a_fixed_part_long_enough_to_cache_gets_a_breakpoint_after_it() -> None:
    from lore_plugin.capture.prompt import SYSTEM_PROMPT

    long_system = "Rules of the memory. " * 400  # ~2,400 tokens: enough for Sonnet's 1,024
    with FakeAnthropic(ScriptedResponder(default=tool_reply("record_knowledge", ANSWER))) as api:
        AnthropicLLM("k", "claude-sonnet-5", 5.0, base_url=api.url).call_tool(
            system=long_system, prompt="p", tool=RECORD_KNOWLEDGE_TOOL)
        AnthropicLLM("k", "claude-haiku-4-5", 5.0, base_url=api.url).call_tool(
            system=SYSTEM_PROMPT, prompt="p", tool=RECORD_KNOWLEDGE_TOOL)
    cached, plain = api.messages
    assert cached["system"] == [{"type": "text", "text": long_system,
                                 "cache_control": {"type": "ephemeral"}}]
    assert plain["system"] == SYSTEM_PROMPT  # Haiku 4.5 caches from 4,096 tokens: not worth it
