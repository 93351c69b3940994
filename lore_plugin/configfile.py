"""Reading ~/.lore/config.toml and the LORE_* environment into plain values.

Standard library only, and no pathlib or dataclasses: the Stop hook calls this after every turn
and needs just two values from it. config.py wraps the same values in the frozen Settings.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any

DEFAULT_MODEL = "claude-haiku-4-5"
PATH = "path"  # a value kind: a string with ~ expanded

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
    ("recall", "on_prompt"): ("recall_on_prompt", bool),
}


def _coerce(value: Any, kind: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ValueError("expected true or false")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
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
            values[attr] = _coerce(table[key], kind)
        except ValueError as exc:
            warnings.append(f"config [{section}] {key} = {table[key]!r} ignored: {exc}")
    values["home"] = home
    values["db_path"] = os.path.expanduser(
        env.get("LORE_DB_PATH") or values.get("db_path") or os.path.join(home, "memory.db"))
    if env.get("LORE_MODEL"):
        values["claude_model"] = env["LORE_MODEL"]
    if env.get("LORE_BATCH_SIZE", "").isdigit() and int(env["LORE_BATCH_SIZE"]) > 0:
        values["batch_size"] = int(env["LORE_BATCH_SIZE"])
    return values, warnings
