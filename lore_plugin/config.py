"""One frozen Settings object, built from the environment and ~/.lore/config.toml.

Read at entry points only (CLI, server, hooks, worker) and passed down. Light imports only:
hooks load this module on every turn.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any

DEFAULT_MODEL = "claude-haiku-4-5"


def lore_home() -> Path:
    return Path(os.environ.get("LORE_HOME") or Path.home() / ".lore").expanduser()


@dataclass(frozen=True)
class Settings:
    db_path: Path
    home: Path
    batch_size: int = 20
    claude_model: str = DEFAULT_MODEL
    api_key_env: str = "ANTHROPIC_API_KEY"
    max_requests_per_hour: int = 120
    llm_timeout_secs: float = 60.0
    consolidation_interval_secs: float = 7200.0
    similarity_threshold: float = 0.8  # topic link candidates
    merge_threshold: float = 0.9
    concept_link_threshold: float = 0.7
    edge_decay: float = 0.05
    edge_prune_below: float = 0.15
    prune_age_days: float = 30.0
    session_brief: bool = True
    stale_tail_secs: float = 300.0
    retry_backoff_secs: float = 60.0  # doubles after each failed attempt
    park_after: int = 5  # failed attempts before a batch is parked for `lore ingest --retry-failed`
    batch_bytes: int = 512 * 1024  # transcript bytes read per extraction call
    warnings: tuple[str, ...] = field(default=())  # problems found while loading, for status

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def lock_dir(self) -> Path:
        return self.home / "locks"

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


# config.toml section/key -> Settings field, with the type it must have.
_KEYS: dict[tuple[str, str], tuple[str, type]] = {
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
    ("database", "path"): ("db_path", Path),
    ("claude", "api_key_env"): ("api_key_env", str),
    ("brief", "enabled"): ("session_brief", bool),
}


def _coerce(value: Any, kind: type) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ValueError("expected true or false")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is Path and isinstance(value, str) and value:
        return Path(value).expanduser()
    if isinstance(value, kind) and not isinstance(value, bool):
        if kind in (int, float) and value <= 0:
            raise ValueError("must be positive")
        return value
    raise ValueError(f"expected {kind.__name__}")


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Never raises: a broken config file falls back to defaults and records a warning."""
    env = dict(os.environ) if env is None else env
    home = Path(env.get("LORE_HOME") or Path.home() / ".lore").expanduser()
    values: dict[str, Any] = {}
    warnings: list[str] = []
    config_path = Path(env.get("LORE_CONFIG") or home / "config.toml").expanduser()
    try:
        with open(config_path, "rb") as fh:
            import tomllib  # only when there is a file: hooks run this on every turn

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
    db_path = Path(env.get("LORE_DB_PATH") or values.pop("db_path", home / "memory.db"))
    settings = Settings(db_path=db_path.expanduser(), home=home, **values)
    if env.get("LORE_MODEL"):
        settings = replace(settings, claude_model=env["LORE_MODEL"])
    if env.get("LORE_BATCH_SIZE", "").isdigit() and int(env["LORE_BATCH_SIZE"]) > 0:
        settings = replace(settings, batch_size=int(env["LORE_BATCH_SIZE"]))
    return replace(settings, warnings=tuple(warnings))
