"""The one-method LLM seam: `call_tool` forces one tool and returns its input.

Backends: the anthropic SDK (with an API key), the `claude` CLI (a subscription login), and
`FakeLLM` for tests; pick_llm puts each behind budget.GuardedLLM (the request and token caps
and the token ledger). Importing this module is cheap: anthropic (~0.9 s) is imported only
when an API call is made.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import random
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from ..core.config import Settings
from ..core.errors import AnswerTruncated, LLMError, LLMTransient, LLMUnavailable
from ..core.private import private_dir
from .budget import BudgetGuard, GuardedLLM
from .claude_cli import ClaudeCliLLM, Tool
from .usage import Ledger, Usage, usage_from

__all__ = ["LLM", "AnthropicLLM", "BudgetGuard", "FakeLLM", "GuardedLLM",
           "llm_status", "paused_reason", "pick_llm"]

log = logging.getLogger(__name__)
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
# No temperature is sent: the API version this SDK speaks (2026-10-21) removed the sampling
# parameters and answers 400 to any of them. Consistent naming comes from the prompt instead
# (known facts and topic names to reuse verbatim).
# Writing the answer takes time in proportion to its length: the configured timeout is for an
# answer of up to TIMEOUT_TOKENS, and grows with the output asked for beyond that, so a long
# answer is not cut off half-written (and paid for) as often as a short one.
TIMEOUT_TOKENS = 4096
CHARS_PER_TOKEN = 3.5
# The shortest prefix the API caches, by model family (Anthropic's prompt-caching docs); an
# unknown model gets the largest, so a breakpoint is never sent where it cannot count.
CACHE_MIN_TOKENS = {"claude-haiku-4": 4096, "claude-opus-4-5": 4096, "claude-3-5-haiku": 2048,
                    "claude-3-haiku": 2048, "claude-sonnet": 1024, "claude-opus-4": 1024}


class LLM(Protocol):
    def call_tool(
        self, *, system: str, prompt: str, tool: Tool, max_tokens: int = 4096
    ) -> dict[str, Any]:
        """The input the model gave the forced `tool`; LLMError on failure or no usable answer."""
        ...


# --- anthropic SDK ---------------------------------------------------------------------------


def _retryable_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def cache_min_tokens(model: str) -> int:
    for prefix, tokens in CACHE_MIN_TOKENS.items():
        if model.startswith(prefix):
            return tokens
    return max(CACHE_MIN_TOKENS.values())


def system_blocks(model: str, system: str, tool: Tool) -> str | list[dict[str, Any]]:
    """The system prompt, with a prompt-caching breakpoint after it when the fixed part of
    every call (the tool's schema, then the system prompt) is long enough for the model to
    cache; the data block that follows differs from call to call."""
    fixed = (len(system) + len(json.dumps(tool))) / CHARS_PER_TOKEN
    if fixed < cache_min_tokens(model):
        return system
    return [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]


class AnthropicLLM:
    """Messages API with the tool forced through tool_choice; retries transient failures."""

    def __init__(
        self,
        api_key: str,
        model: str,
        timeout: float,
        max_retries: int = 2,
        base_url: str | None = None,
        *,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model, self.timeout, self.max_retries = model, timeout, max(0, max_retries)
        self._api_key, self._base_url = api_key, base_url
        self._backoff, self._sleep = backoff, sleep
        self._client: Any = None
        self.last_usage: Usage | None = None  # the last answered request's tokens

    def _get_client(self) -> Any:
        if self._client is None:
            import anthropic  # lazy: hooks and the MCP server must not pay for it

            # Our own loop retries (bounded, testable); base_url=None lets the SDK read
            # ANTHROPIC_BASE_URL.
            self._client = anthropic.Anthropic(
                api_key=self._api_key, base_url=self._base_url, timeout=self.timeout, max_retries=0
            )
        return self._client

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        with contextlib.suppress(TypeError, ValueError):
            return min(max(float(retry_after or ""), 0.0), 60.0)
        # Full jitter keeps several detached workers from retrying in lockstep.
        return self._backoff * (2**attempt) * random.uniform(0.5, 1.0)

    def call_tool(
        self, *, system: str, prompt: str, tool: Tool, max_tokens: int = 4096
    ) -> dict[str, Any]:
        import anthropic

        client = self._get_client()
        for attempt in range(self.max_retries + 1):
            retry_after: str | None = None
            try:
                message = client.messages.create(
                    model=self.model,
                    max_tokens=max_tokens,
                    system=system_blocks(self.model, system, tool),
                    messages=[{"role": "user", "content": prompt}],
                    tools=[tool],
                    tool_choice={"type": "tool", "name": tool["name"]},
                    timeout=self.timeout * max(1.0, max_tokens / TIMEOUT_TOKENS),
                )
                # Recorded before the answer is judged: a truncated answer was paid for too.
                self.last_usage = usage_from(getattr(message, "usage", None))
                return _tool_input(message, tool["name"])
            except anthropic.APIStatusError as exc:
                if not _retryable_status(exc.status_code):
                    raise LLMError(
                        f"anthropic API refused the request ({exc.status_code}): "
                        f"{_api_message(exc)}"
                    ) from None
                failure = f"anthropic API error {exc.status_code}: {_api_message(exc)}"
                retry_after = exc.response.headers.get("retry-after")
            except anthropic.APIConnectionError as exc:  # includes APITimeoutError
                failure = f"anthropic API unreachable: {type(exc).__name__}: {exc}"
            except anthropic.AnthropicError as exc:
                raise LLMError(f"anthropic SDK error: {exc}") from None
            if attempt < self.max_retries:
                self._sleep(self._delay(attempt, retry_after))
        # Rate limits, overload, timeouts, lost connections: the request was fine.
        raise LLMTransient(f"{failure} (after {self.max_retries + 1} attempts)")


def _api_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))[:300]
    return str(exc)[:300]


def _tool_input(message: Any, name: str) -> dict[str, Any]:
    if getattr(message, "stop_reason", None) == "max_tokens":
        # The tool input was cut off mid-JSON: better no answer than half a hierarchy.
        raise AnswerTruncated(f"the model's {name} answer was truncated at max_tokens")
    for block in message.content:
        if block.type == "tool_use" and block.name == name:
            if not isinstance(block.input, dict):
                raise LLMError(f"{name} input is not an object")
            return dict(block.input)
    raise LLMError(f"the model answered without calling {name}")


# --- fake ------------------------------------------------------------------------------------

Answer = dict[str, Any] | BaseException | type[BaseException] | Callable[..., dict[str, Any]]


class FakeLLM:
    """Queued answers for tests: a dict is returned, an exception raised, a callable called
    with the call's keyword arguments. `default` answers once the queue is empty."""

    def __init__(self, answers: Iterable[Answer] = (), default: Answer | None = None) -> None:
        self._answers: deque[Answer] = deque(answers)
        self._default = default
        self.calls: list[dict[str, Any]] = []

    def call_tool(
        self, *, system: str, prompt: str, tool: Tool, max_tokens: int = 4096
    ) -> dict[str, Any]:
        call = {"system": system, "prompt": prompt, "tool": tool, "max_tokens": max_tokens}
        self.calls.append(call)
        answer = self._answers.popleft() if self._answers else self._default
        if answer is None:
            raise LLMError("FakeLLM has no answer left")
        if isinstance(answer, BaseException) or (
            isinstance(answer, type) and issubclass(answer, BaseException)
        ):
            raise answer
        if callable(answer):
            return answer(**call)  # type: ignore[return-value]  # a test double returns its dict
        return copy.deepcopy(answer)  # callers may mutate what they get


# --- choosing a backend ----------------------------------------------------------------------

WhichFn = Callable[..., str | None]


def _find_claude(env: Mapping[str, str], which: WhichFn) -> str | None:
    override = env.get("LORE_CLAUDE_PATH")
    if override:
        return override if os.access(override, os.X_OK) else None
    # An injected env without PATH means "this process's PATH", which is which()'s default.
    return which("claude", path=env["PATH"]) if "PATH" in env else which("claude")


def budget_path(settings: Settings) -> Path:
    return settings.home / "llm_budget.json"


def pick_llm(
    settings: Settings, env: Mapping[str, str] | None = None, which: WhichFn = shutil.which
) -> LLM:
    """API key -> anthropic SDK; else `claude` on PATH -> CLI; else LLMUnavailable."""
    env = os.environ if env is None else env
    off = switched_off(settings)
    if off:
        raise LLMUnavailable(off)
    guard = BudgetGuard(budget_path(settings), settings.max_requests_per_hour)
    ledger = Ledger(settings)
    key = env.get(settings.api_key_env) or None
    if key:
        inner: LLM = AnthropicLLM(
            key,
            settings.claude_model,
            settings.llm_timeout_secs,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
        )
        return GuardedLLM(inner, guard, ledger, settings.claude_model)
    claude = _find_claude(env, which)
    if claude:
        # The CLI starts a whole agent (and retries inside), so it gets more time than one call.
        inner = ClaudeCliLLM(
            claude,
            settings.claude_model,
            settings.llm_timeout_secs * 3,
            cwd=_private_cwd(settings.home),
            env=env,
        )
        return GuardedLLM(inner, guard, ledger, settings.claude_model)
    raise LLMUnavailable(f"extraction is {_paused_reason(settings)}")


def _private_cwd(home: Path) -> str | None:
    try:
        return str(private_dir(home / "claude-cwd"))
    except OSError:
        return None  # a read-only home: ClaudeCliLLM makes a private temporary folder instead


def switched_off(settings: Settings) -> str | None:
    """Why the user turned extraction off (config or `lore pause`), or None."""
    from ..core.controls import off_reason

    return off_reason(settings)


def _paused_reason(settings: Settings) -> str:
    source = key_source(settings)
    missing = source if source == DEFAULT_KEY_ENV else f"API key in {source}"
    return f"paused: no {missing} and no `claude` CLI on PATH"


def key_source(settings: Settings) -> str:
    """Where the API key is read from, for messages. A configured api_key_env is never
    repeated: people paste the key itself there, and these lines reach the SessionStart
    brief, `lore status` and the logs."""
    if settings.api_key_env == DEFAULT_KEY_ENV:
        return DEFAULT_KEY_ENV
    return "the variable named by config [claude] api_key_env"


def paused_reason(settings: Settings, env: Mapping[str, str] | None = None,
                  which: WhichFn = shutil.which) -> str | None:
    """Why extraction must wait, or None when it need not; unlike llm_status it reads no
    budget file (the SessionStart brief asks this)."""
    env = os.environ if env is None else env
    off = switched_off(settings)
    if off:
        return off
    if env.get(settings.api_key_env) or _find_claude(env, which):
        return None
    return _paused_reason(settings)


def llm_status(
    settings: Settings, env: Mapping[str, str] | None = None, which: WhichFn = shutil.which
) -> str:
    """One line for `lore status`; starts with "paused" when extraction must wait. Cheap."""
    env = os.environ if env is None else env
    off = switched_off(settings)
    if off:
        return off
    used = BudgetGuard(budget_path(settings), settings.max_requests_per_hour).used()
    budget = f"{used}/{settings.max_requests_per_hour} requests in the last hour"
    if env.get(settings.api_key_env):
        where = env.get("ANTHROPIC_BASE_URL")
        via = f" via {where}" if where else ""
        return (
            f"anthropic API{via} ({settings.claude_model}, key from {key_source(settings)}); "
            f"{budget}"
        )
    claude = _find_claude(env, which)
    if claude:
        return f"claude CLI at {claude} ({settings.claude_model}, your Claude login); {budget}"
    return _paused_reason(settings)
