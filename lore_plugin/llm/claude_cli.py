"""The `claude` CLI backend of the LLM seam: `claude -p` with a JSON schema, for users whose
subscription login is their only credential. No API key, no anthropic import."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from typing import Any

from ..core.errors import LLMError, LLMTransient
from .usage import Usage, usage_from

DISABLE_MARKER = "LORE_DISABLE"  # set in the nested `claude -p`: every Lore hook returns at once
Tool = dict[str, Any]


class ClaudeCliLLM:
    """`claude -p` with --json-schema: the user's subscription login, no API key needed.

    Measured on Claude Code 2.1.197: `--json-schema` makes the CLI offer a StructuredOutput
    tool whose input_schema is our schema; it validates the answer (re-asking up to 5 times)
    and prints one JSON object with `structured_output` (the dict) and `result` (its JSON text).
    """

    def __init__(
        self,
        claude_path: str,
        model: str,
        timeout: float,
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.claude_path, self.model, self.timeout = claude_path, model, timeout
        # A neutral cwd keeps the project's CLAUDE.md out of a prompt that does not need it. It
        # is never the shared temp folder: another user could plant a CLAUDE.md or settings there.
        self._cwd = cwd or tempfile.mkdtemp(prefix="lore-claude-")
        self._env = env
        self.last_usage: Usage | None = None

    def command(self, system: str, tool: Tool) -> list[str]:
        system += (
            f"\n\nGive your answer by calling the StructuredOutput tool exactly once; its "
            f"input is the {tool['name']} payload: {tool.get('description', '')}"
        )
        return [
            self.claude_path, "-p",
            "--no-session-persistence",  # the nested session leaves no transcript to ingest
            "--output-format", "json",
            "--json-schema", json.dumps(tool["input_schema"]),
            "--strict-mcp-config", "--mcp-config", '{"mcpServers":{}}',
            "--tools", "",  # only StructuredOutput remains: no agent loop, a small prompt
            "--system-prompt", system,  # replaces Claude Code's long coding-agent prompt
            "--model", self.model,
        ]  # fmt: skip

    def child_env(self, max_tokens: int) -> dict[str, str]:
        env = dict(os.environ if self._env is None else self._env)
        env[DISABLE_MARKER] = "1"
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(max_tokens)
        env.setdefault("MAX_THINKING_TOKENS", "0")  # extraction needs no thinking budget
        env.setdefault("CLAUDE_CODE_MAX_RETRIES", "2")  # fail within our timeout, not after it
        return env

    def call_tool(
        self, *, system: str, prompt: str, tool: Tool, max_tokens: int = 4096
    ) -> dict[str, Any]:
        try:
            proc = subprocess.Popen(
                self.command(system, tool), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=self._cwd, env=self.child_env(max_tokens),
                start_new_session=os.name == "posix",  # so a timeout can kill the whole tree
            )  # fmt: skip
        except OSError as exc:
            raise LLMError(f"cannot run {self.claude_path}: {exc}") from None
        try:
            out, err = proc.communicate(prompt.encode("utf-8"), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            # A grandchild that left the process group may still hold the pipes: don't wait on it.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=5)
            raise LLMTransient(f"claude -p timed out after {self.timeout:.0f}s") from None
        result = cli_result(
            out.decode("utf-8", "replace"), proc.returncode, err.decode("utf-8", "replace")
        )
        # The JSON result carries the session's usage and its cost, failed or not.
        self.last_usage = usage_from(result.get("usage"), result.get("total_cost_usd"))
        return structured_output(result)


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    if os.name == "posix":
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()


def parse_cli_output(stdout: str, returncode: int, stderr: str = "") -> dict[str, Any]:
    """The structured answer from `claude -p --output-format json`, or LLMError saying why not."""
    return structured_output(cli_result(stdout, returncode, stderr))


def cli_result(stdout: str, returncode: int, stderr: str = "") -> dict[str, Any]:
    """The one JSON object `claude -p --output-format json` prints, or LLMError."""
    result: Any = None
    for candidate in (stdout.strip(), *reversed(stdout.strip().splitlines())):
        with contextlib.suppress(ValueError):
            result = json.loads(candidate)
            break
    if not isinstance(result, dict):
        tail = (stderr.strip() or stdout.strip())[-300:]
        raise LLMError(
            f"claude -p exited {returncode} without a JSON result: {tail or 'no output'}"
        )
    return result


def structured_output(result: dict[str, Any]) -> dict[str, Any]:
    if result.get("is_error") or result.get("subtype", "success") != "success":
        why = result.get("errors") or result.get("result") or result.get("subtype")
        raise LLMError(f"claude -p failed ({result.get('subtype')}): {str(why)[:300]}")
    if isinstance(result.get("structured_output"), dict):
        return result["structured_output"]
    # Fallback: the model wrote the JSON as its final text instead of calling the tool.
    text = str(result.get("result") or "").strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    with contextlib.suppress(ValueError):
        data = json.loads(text)
        if isinstance(data, dict):
            return data
    raise LLMError(f"claude -p answered without structured output: {text[:200]!r}")
