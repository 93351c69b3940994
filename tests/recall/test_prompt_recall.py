"""Recall on each prompt, as Claude Code runs it: the UserPromptSubmit hook through
scripts/lore-launch (LORE_PYTHON set), a real database built with the real model, and a real
MCP server subprocess answering on its private socket."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from lore_plugin.embedding.embedder import assemble_from_packages
from lore_plugin.hooks.user_prompt import by_keywords
from lore_plugin.recall import prompt_recall
from lore_plugin.recall.memory import Memory
from lore_plugin.recall.prompt_socket import ask, run_dir
from lore_plugin.store import Store
from tests.conftest import FIXTURES, MODEL_CACHE, PYTHON, ROOT, python_env
from tests.service_running import stop_service

LAUNCH = ROOT / "scripts" / "lore-launch"
FACT = "The billing deploy window is Thursday 09:00 UTC"
STRONG = "When is the billing deploy window?"
UNRELATED = "How do I parse a JSON file in Rust?"
PARAPHRASE = "what day do we ship billing?"


@pytest.fixture()
def home(isolated_home: Path, tmp_path: Path, embedder, clock) -> Path:
    """A memory with one branch about billing deploys and one about editor settings."""
    memory = Memory(isolated_home / "memory.db", embedder, clock=clock, project=str(tmp_path))
    topic = memory.store("How billing ships", "Billing deployment", depth=0, source="user")
    concept = memory.store("When deploys may happen", "Deploy window", parent_id=topic.id,
                           depth=1, source="user")
    memory.store("Agreed in conversation: deploys happen Thursday 09:00 UTC.", FACT,
                 parent_id=concept.id, depth=2, source="user")
    editor = memory.store("Editor settings", "Editor preferences", depth=0)
    prefs = memory.store("Indentation", "Indentation preferences", parent_id=editor.id, depth=1)
    memory.store("The user wants tabs, not spaces, in Go files.",
                 "The user prefers tabs in Go files", parent_id=prefs.id, depth=2)
    memory.close()
    return isolated_home


def env_for(home: Path, **extra: str) -> dict[str, str]:
    model_dir = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    return python_env(LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"),
                      LORE_PYTHON=PYTHON, LORE_EMBED_MODEL_DIR=str(model_dir),
                      LORE_NO_DOWNLOAD="1", **extra)


def prompt_hook(home: Path, prompt: object, session: str = "session-1",
                **extra: str) -> tuple[str | None, subprocess.CompletedProcess]:
    """Runs the hook as Claude Code does; returns its additionalContext (None: nothing)."""
    payload = {"session_id": session, "transcript_path": "/nonexistent/t.jsonl",
               "cwd": str(home), "hook_event_name": "UserPromptSubmit", "prompt": prompt,
               "permission_mode": "default"}
    proc = subprocess.run([str(LAUNCH), "hook", "user-prompt"], input=json.dumps(payload).encode(),
                          env=env_for(home, **extra), capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    if not proc.stdout:
        return None, proc
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    return out["additionalContext"], proc


def items_of(context: str) -> list[str]:
    return [line for line in context.splitlines() if line.startswith("- [")]


def test_the_recorded_claude_code_payload_reaches_the_hook(home):
    sample = next(json.loads(line)["stdin"] for line in
                  (FIXTURES / "hook_stdin_samples.jsonl").read_text().splitlines()
                  if '"UserPromptSubmit"' in line)
    sample["prompt"] = STRONG
    proc = subprocess.run([str(LAUNCH), "hook", "user-prompt"], input=json.dumps(sample).encode(),
                          env=env_for(home), capture_output=True, timeout=60)
    assert FACT in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_a_strong_match_is_injected_with_id_source_and_date_as_recalled_data(home):
    context, _ = prompt_hook(home, STRONG)
    assert context is not None and FACT in context
    assert context.startswith("<recalled-notes>") and context.endswith("</recalled-notes>")
    assert "not instructions" in context
    (item,) = [line for line in items_of(context) if FACT in line]
    assert f"Billing deployment › Deploy window: {FACT}" in item  # the fact with its path
    assert "from: user said" in item and time.strftime("%Y-%m-%d", time.localtime(1_750_000_000)) in item
    fid = item[3:15]
    memory = Memory(home / "memory.db", None)
    try:
        assert memory.get(fid).summary == FACT  # the id is the fragment's
    finally:
        memory.close()
    assert sum(len(line) + 1 for line in items_of(context)) <= prompt_recall.BUDGET


ROLLOUT = "New versions reach 5% of users for a day before everyone"


@pytest.fixture()
def releases(isolated_home: Path, embedder, clock):
    """A topic › concept › facts branch whose concept is named in words the facts never use."""
    memory = Memory(isolated_home / "memory.db", embedder, clock=clock)
    topic = memory.store("How new versions of the app reach users", "Releases", depth=0,
                         source="user")
    concept = memory.store("Gradual rollouts", "Rollouts", parent_id=topic.id, depth=1,
                           source="user")
    memory.store("A new version goes to 5% of users for one day, then to everyone if the error "
                 "rate stays flat.", ROLLOUT, parent_id=concept.id, depth=2, source="user")
    memory.store("Rolling back means redeploying the previous tag with make rollback.",
                 "Rollback redeploys the previous tag", parent_id=concept.id, depth=2,
                 source="user")
    yield memory, {topic.id, concept.id}
    memory.close()


@pytest.mark.parametrize("prompt", ["how are rollouts staged?",
                                    "What fraction of users get a new version first?"])
def test_a_matching_concept_brings_its_facts_with_their_path_never_its_bare_name(releases,
                                                                                 prompt):
    memory, headings = releases
    answer = prompt_recall.answer(memory, {"prompt": prompt, "seen": []}, warm=True)
    assert answer["context"] is not None
    assert f"Releases › Rollouts: {ROLLOUT}" in answer["context"]
    assert answer["ids"] and not headings & set(answer["ids"])  # no heading is injected


def test_without_the_model_a_heading_matched_by_words_gives_way_to_its_children(releases):
    """The hook's own fallback, as it runs when no server answers."""
    memory, headings = releases
    found = by_keywords(str(memory.db_path),
                        "how do gradual rollouts of releases work for new versions", set())
    assert found["context"] is not None and f"Releases › Rollouts: {ROLLOUT}" in found["context"]
    assert found["ids"] and not headings & set(found["ids"])


def test_nothing_is_injected_for_an_unrelated_prompt(home):
    assert prompt_hook(home, UNRELATED)[0] is None
    assert prompt_hook(home, "ok, thanks")[0] is None


def test_nothing_is_injected_twice_in_one_session(home):
    assert FACT in (prompt_hook(home, STRONG, session="s-a")[0] or "")
    assert prompt_hook(home, STRONG, session="s-a")[0] is None
    assert prompt_hook(home, "when is the billing deploy window again?", session="s-a")[0] is None
    assert FACT in (prompt_hook(home, STRONG, session="s-b")[0] or "")  # another session
    record = home / "sessions" / "s-a.recalled"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700


def test_the_config_switch_turns_it_off(home):
    (home / "config.toml").write_text("[recall]\non_prompt = false\n")
    assert prompt_hook(home, STRONG)[0] is None
    assert not (home / "sessions").exists()


@pytest.mark.parametrize("prompt", [None, "", "   ", 7, ["a"], "x" * 200_000])
def test_odd_prompts_never_fail_the_session(home, prompt):
    prompt_hook(home, prompt)  # asserts exit 0 and an empty stderr


def test_no_database_yet_injects_nothing(tmp_path, isolated_home):
    assert prompt_hook(isolated_home, STRONG)[0] is None


@dataclass
class Running:
    proc: subprocess.Popen
    info_path: Path  # where the answering process announces its socket
    home: Path
    path: str

    def stop(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=30)
        if self.path == "service":
            stop_service(self.home)


@pytest.fixture(params=["in-process", "service"])
def server(home: Path, tmp_path: Path, request: pytest.FixtureRequest):
    """The real MCP server, started as Claude Code starts it, waiting on stdin: the in-process
    server answering on its own socket, or the thin front whose memory service answers."""
    project = tmp_path / "project"
    project.mkdir()
    path = request.param
    proc = subprocess.Popen([str(LAUNCH), "mcp"], cwd=project, stdin=subprocess.PIPE,
                            env=env_for(home, LORE_SERVICE="off" if path == "in-process" else "on"),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if path == "service":  # the front starts it at initialize
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n')  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    log = home / "logs" / ("server.log" if path == "in-process" else "service.log")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if log.exists() and "warm in" in log.read_text():
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the server did not warm up")
    name = f"{proc.pid}.json" if path == "in-process" else "service.json"
    running = Running(proc, Path(run_dir(str(home))) / name, home, path)
    yield running
    if proc.poll() is None:
        running.stop()


def test_a_running_server_answers_on_a_private_socket_with_the_model(home, server):
    folder = Path(run_dir(str(home)))
    info_path = server.info_path
    info = json.loads(info_path.read_text())
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(info_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(os.stat(info["socket"]).st_mode) == 0o600
    answer = ask(str(home), str(home / "memory.db"), {"prompt": STRONG, "seen": []}, 5.0)
    assert answer is not None and answer["judged_by"] == "cosine"
    assert FACT in answer["context"]
    # A paraphrase that shares too few words for the keyword fallback still matches by meaning.
    paraphrase = PARAPHRASE
    store = Store(home / "memory.db", readonly=True)
    try:
        assert prompt_recall.strong_by_words(store, paraphrase, set()) == []
    finally:
        store.close()
    context, _ = prompt_hook(home, paraphrase, session="p-1")
    assert context is not None and FACT in context
    assert prompt_hook(home, UNRELATED, session="p-1")[0] is None
    assert prompt_hook(home, paraphrase, session="p-1")[0] is None  # no repeats
    server.stop()
    assert not info_path.exists() and not os.path.exists(info["socket"])  # cleaned up on exit


def test_a_client_without_the_token_gets_nothing(home, server):
    info = json.loads(server.info_path.read_text())
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(info["socket"])
        sock.sendall(json.dumps({"prompt": STRONG, "seen": [], "token": "guess"}).encode() + b"\n")
        assert sock.recv(65536) == b""  # closed without an answer


def test_a_dead_servers_announcement_is_cleared_and_the_hook_falls_back(home):
    folder = Path(run_dir(str(home)))
    folder.mkdir(mode=0o700)
    dead = subprocess.run([PYTHON, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = folder / f"{dead}.json"
    stale.write_text(json.dumps({"pid": int(dead), "socket": str(folder / f"{dead}.sock"),
                                 "token": "x", "db": str(home / "memory.db")}))
    context, _ = prompt_hook(home, STRONG)
    assert context is not None and FACT in context  # keyword search alone found it
    assert not stale.exists()


def test_the_hook_never_loads_the_model_or_numpy(home):
    """Even the fallback: keyword search alone, through apsw."""
    payload = json.dumps({"session_id": "x", "prompt": STRONG})
    code = ("import io, json, sys\n"
            f"sys.stdin = io.TextIOWrapper(io.BytesIO({payload!r}.encode()))\n"
            "from lore_plugin import hooks\n"
            "hooks.main(['user-prompt'])\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'numpy', 'onnxruntime', 'fastembed', 'tokenizers', 'anthropic', 'mcp'})), file=sys.stderr)\n")
    out = subprocess.run([PYTHON, "-c", code], env=env_for(home), capture_output=True, text=True,
                         timeout=60)
    assert FACT in out.stdout  # it did inject, by keywords
    assert json.loads(out.stderr.strip().splitlines()[-1]) == []


def test_a_home_too_deep_for_a_socket_path_gets_a_private_temp_folder(tmp_path):
    from lore_plugin.recall.prompt_socket import Listener

    home = tmp_path / ("deep-" * 20) / "lore"
    listener = Listener(str(home), str(home / "memory.db"),
                        lambda request: {"context": request["prompt"].upper(), "ids": []})
    listener.start()
    try:
        folder = Path(listener.socket_path).parent
        assert folder != Path(run_dir(str(home))) and stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert ask(str(home), str(home / "memory.db"), {"prompt": "hi"}, 5.0) == {
            "context": "HI", "ids": []}
        assert ask(str(home), str(tmp_path / "other.db"), {"prompt": "hi"}, 5.0) is None
    finally:
        listener.close()
    assert not folder.exists() and not Path(listener.info_path).exists()


def test_a_server_still_loading_its_model_answers_by_words_at_once(home, tmp_path):
    """The first prompt of a session arrives while its server loads the model: the answer
    comes from keyword search on the server's connection instead of waiting for the model.
    (The in-process server; tests/service has the memory service's case.)"""
    proc = subprocess.Popen([str(LAUNCH), "mcp"], env=env_for(home, LORE_SERVICE="off"),
                            cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        info = Path(run_dir(str(home))) / f"{proc.pid}.json"
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        answer = ask(str(home), str(home / "memory.db"), {"prompt": STRONG, "seen": []}, 5.0)
        assert answer is not None and answer["judged_by"] == "words"
        assert FACT in answer["context"] and time.monotonic() - started < 2.0
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)
