"""Reading ~/.lore/config.toml and the LORE_* environment into plain values.

Standard library only, and no pathlib or dataclasses: the Stop hook calls this after every turn
and needs just two values from it. config.py wraps the same values in the frozen Settings.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

DEFAULT_MODEL = "claude-haiku-4-5"
PATH = "path"  # a value kind: a string with ~ expanded
LIST = "list"  # a value kind: a list of strings, each with ~ expanded

# config.toml section/key -> Settings field, with the type it must have.
_KEYS: dict[tuple[str, str], tuple[str, Any]] = {
    ("ingestion", "batch_size"): ("batch_size", int),
    ("ingestion", "claude_model"): ("claude_model", str),
    ("ingestion", "max_requests_per_hour"): ("max_requests_per_hour", int),
    ("ingestion", "llm_timeout_secs"): ("llm_timeout_secs", float),
    ("ingestion", "retry_backoff_secs"): ("retry_backoff_secs", float),
    ("ingestion", "park_after"): ("park_after", int),
    ("ingestion", "batch_bytes"): ("batch_bytes", int),
    ("ingestion", "stale_tail_secs"): ("stale_tail_secs", float),
    ("ingestion", "max_tokens_per_day"): ("max_tokens_per_day", int),
    ("ingestion", "enabled"): ("ingestion_enabled", bool),
    ("ingestion", "ignore_projects"): ("ignore_projects", LIST),
    ("ingestion", "max_workers"): ("max_workers", int),
    ("consolidation", "interval_secs"): ("consolidation_interval_secs", float),
    ("consolidation", "similarity_threshold"): ("similarity_threshold", float),
    ("consolidation", "merge_threshold"): ("merge_threshold", float),
    ("consolidation", "concept_link_threshold"): ("concept_link_threshold", float),
    ("consolidation", "edge_decay"): ("edge_decay", float),
    ("consolidation", "edge_prune_below"): ("edge_prune_below", float),
    ("consolidation", "prune_age_days"): ("prune_age_days", float),
    ("database", "path"): ("db_path", PATH),
    ("claude", "api_key_env"): ("api_key_env", str),
    ("brief", "enabled"): ("session_brief", bool),
    ("brief", "max_chars"): ("brief_chars", int),
    ("recall", "on_prompt"): ("recall_on_prompt", bool),
}


# Inclusive ranges of the numeric settings. A value outside is ignored with a warning naming
# the key, and the default is used: an infinite timeout, a NaN threshold or a billion-line
# batch would otherwise reach the code that trusts them. A numeric key not listed here must
# still be finite and positive.
_BOUNDS: dict[str, tuple[float, float]] = {
    "batch_size": (1, 1000),
    "max_requests_per_hour": (1, 100_000),
    "llm_timeout_secs": (1.0, 3600.0),
    "retry_backoff_secs": (1.0, 86400.0),
    "park_after": (1, 1000),
    "batch_bytes": (1024, 16 * 1024 * 1024),  # below lines.MAX_LINE_BYTES
    "stale_tail_secs": (1.0, 7 * 86400.0),
    "consolidation_interval_secs": (60.0, 30 * 86400.0),
    "similarity_threshold": (0.0, 1.0),
    "merge_threshold": (0.0, 1.0),
    "concept_link_threshold": (0.0, 1.0),
    "edge_decay": (0.0, 0.99),  # 1 would prune every edge in one cycle
    "edge_prune_below": (0.0, 1.0),
    "prune_age_days": (1.0, 36500.0),
    "brief_chars": (500, 9000),  # Claude Code truncates hook context at 10,000 characters
}
# A variable *name*: a pasted key fails this, and is then never repeated in a warning.
# Patterns, not compiled ones: `re` is imported only when a value needs the check, because its
# import alone (~6 ms) would be most of the Stop hook's work.
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_MODEL_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]{0,199}$"
_NOT_ECHOED = frozenset({"api_key_env"})  # what a user may have pasted a secret into


def _fits(pattern: str, value: str) -> bool:
    import re

    return re.match(pattern, value) is not None


def _checked(attr: str, value: Any) -> Any:
    """`value` if it is sane for `attr`; ValueError (the reason) if not."""
    if attr == "api_key_env" and not _fits(_ENV_NAME, value):
        raise ValueError("not an environment variable name (letters, digits and _); the "
                         "value is not shown, in case it is the key itself")
    if attr == "claude_model" and not _fits(_MODEL_NAME, value):
        raise ValueError("not a model name")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value - value != 0:  # NaN or infinite (math.isfinite; math costs the Stop hook)
            raise ValueError("must be a finite number")
        low, high = _BOUNDS.get(attr, (0, float("inf")))
        if not low <= value <= high:
            raise ValueError(f"must be from {low:g} to {high:g}")
    return value


def _coerce(value: Any, kind: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ValueError("expected true or false")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is LIST:
        if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
            return tuple(os.path.expanduser(v) for v in value)
        raise ValueError("expected a list of paths")
    if kind is PATH:
        if isinstance(value, str) and value:
            return os.path.expanduser(value)
        raise ValueError("expected a path")
    if isinstance(value, kind) and not isinstance(value, bool):
        if kind in (int, float) and value <= 0:
            raise ValueError("must be positive")
        return value
    raise ValueError(f"expected {kind.__name__}")


def read_values(env: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Every configured value by Settings field name, plus warnings for what was ignored.
    Never raises: a broken file falls back to the defaults."""
    home = os.path.expanduser(env.get("LORE_HOME") or os.path.join(os.path.expanduser("~"), ".lore"))
    values: dict[str, Any] = {}
    warnings: list[str] = []
    config_path = os.path.expanduser(env.get("LORE_CONFIG") or os.path.join(home, "config.toml"))
    try:
        with open(config_path, "rb") as fh:
            import tomllib  # only when there is a file

            data = tomllib.load(fh)
    except FileNotFoundError:
        data = {}
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        warnings.append(f"config {config_path} ignored (using defaults): {exc}")
        data = {}
    for (section, key), (attr, kind) in _KEYS.items():
        table = data.get(section)
        if not isinstance(table, dict) or key not in table:
            continue
        try:
            values[attr] = _checked(attr, _coerce(table[key], kind))
        except ValueError as exc:
            shown = "..." if attr in _NOT_ECHOED else repr(table[key])[:80]
            warnings.append(f"config [{section}] {key} = {shown} ignored (using the default): "
                            f"{exc}")
    # The [hub] table as written: config.load_settings checks it (hubconfig.py), so the Stop
    # hook, which reads values here and needs no hub, imports no URL parsing for it.
    values["hub_table"] = data.get("hub")
    values["sharing_table"] = data.get("sharing")  # issue 29: checked there too (teamconfig.py)
    values["home"] = home
    values["db_path"] = os.path.expanduser(
        env.get("LORE_DB_PATH") or values.get("db_path") or os.path.join(home, "memory.db"))
    if env.get("LORE_MODEL"):
        if _fits(_MODEL_NAME, env["LORE_MODEL"]):
            values["claude_model"] = env["LORE_MODEL"]
        else:
            warnings.append("LORE_MODEL ignored: not a model name")
    if env.get("LORE_BATCH_SIZE"):
        low, high = _BOUNDS["batch_size"]
        if env["LORE_BATCH_SIZE"].isdigit() and low <= int(env["LORE_BATCH_SIZE"]) <= high:
            values["batch_size"] = int(env["LORE_BATCH_SIZE"])
        else:
            warnings.append(f"LORE_BATCH_SIZE ignored: must be a whole number from {low} to "
                            f"{high}")
    return values, warnings


def claude_projects_dir(env: Mapping[str, str]) -> str:
    """Where Claude Code keeps session transcripts. Claude Code moves all of ~/.claude to
    $CLAUDE_CONFIG_DIR when that is set (and hooks inherit its environment);
    LORE_CLAUDE_PROJECTS overrides both (tests, unusual setups)."""
    if env.get("LORE_CLAUDE_PROJECTS"):
        return os.path.expanduser(env["LORE_CLAUDE_PROJECTS"])
    config = env.get("CLAUDE_CONFIG_DIR")
    home = env.get("HOME") or os.path.expanduser("~")
    base = os.path.expanduser(config) if config else os.path.join(home, ".claude")
    return os.path.join(base, "projects")
