"""The real Claude Code CLI for tests, and an environment that keeps it offline.

`claude_binary()` is `$LORE_CLAUDE_BIN` when set; otherwise a pinned npm install cached under
~/.cache/lore-tests/claude-code, made once (under a lock) on first use. It never skips: a test
that needs Claude Code and cannot get it must fail where someone will see it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

CLAUDE_CODE_VERSION = "2.1.197"
CLAUDE_CODE_PACKAGE = f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"
CACHE_DIR = Path.home() / ".cache" / "lore-tests" / "claude-code"

# Inherited from a developer's own Claude Code session or shell, these would leak a real
# account, a real plugin, or Lore's own settings into the scratch HOME.
_STRIPPED_PREFIXES = ("ANTHROPIC_", "CLAUDE", "LORE_", "MCP_")


class ClaudeUnavailable(RuntimeError):
    """The pinned Claude Code CLI could not be found or installed."""


def _version_of(binary: Path) -> str:
    done = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise ClaudeUnavailable(f"{binary} --version failed ({done.returncode}): {done.stderr}")
    return done.stdout.strip()


def _install(prefix: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ClaudeUnavailable(
            f"npm is not on PATH, so {CLAUDE_CODE_PACKAGE} cannot be installed; "
            "install Node.js and npm, or set LORE_CLAUDE_BIN to a claude binary"
        )
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", CLAUDE_CODE_PACKAGE],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise ClaudeUnavailable(
            f"npm install {CLAUDE_CODE_PACKAGE} failed ({done.returncode}):\n"
            f"{done.stdout}\n{done.stderr}"
        )


def claude_binary() -> Path:
    """The Claude Code CLI the tests run, installed on first use; raises when unavailable."""
    override = os.environ.get("LORE_CLAUDE_BIN")
    if override:
        binary = Path(override)
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            raise ClaudeUnavailable(f"LORE_CLAUDE_BIN={override} is not an executable file")
        return binary

    binary = CACHE_DIR / "node_modules" / ".bin" / "claude"
    CACHE_DIR.parent.mkdir(parents=True, exist_ok=True)
    # Parallel test workers (or CI jobs on one machine) must not run npm into one prefix at once.
    with open(CACHE_DIR.parent / "claude-code.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (binary.exists() and CLAUDE_CODE_VERSION in _safe_version(binary)):
            _install(CACHE_DIR)
        version = _version_of(binary)
    if CLAUDE_CODE_VERSION not in version:
        raise ClaudeUnavailable(f"{binary} is {version!r}, expected {CLAUDE_CODE_VERSION}")
    return binary


def _safe_version(binary: Path) -> str:
    try:
        return _version_of(binary)
    except (ClaudeUnavailable, OSError, subprocess.TimeoutExpired):
        return ""


def claude_env(home: Path, **extra: str | os.PathLike[str] | None) -> dict[str, str]:
    """An environment for running `claude` offline in a scratch HOME.

    No ANTHROPIC_*, CLAUDE*, LORE_* or MCP_* variable is inherited; pass what a test needs as
    keyword arguments (a value of None removes a variable).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_PREFIXES)}
    env.update(
        HOME=str(home),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1",
        LORE_SERVICE_IDLE="60",  # a memory service the plugin's MCP front starts ends soon
    )
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = os.fspath(value)
    return env
