"""One frozen Settings object, built from the environment and ~/.lore/config.toml.

Read at entry points only (CLI, server, hooks, worker) and passed down. The reading itself is
in configfile.py, which the Stop hook uses alone to stay fast.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .configfile import DEFAULT_MODEL, read_values


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
    brief_chars: int = 2500  # the whole SessionStart brief, framing and warnings included
    recall_on_prompt: bool = True  # UserPromptSubmit adds strongly matching memory
    stale_tail_secs: float = 300.0
    retry_backoff_secs: float = 60.0  # doubles after each failed attempt
    park_after: int = 5  # failed attempts before a batch is parked for `lore ingest --retry-failed`
    batch_bytes: int = 512 * 1024  # transcript bytes read per extraction call
    # Cost controls (issue 15). About 150 extraction calls of a busy day fit the default.
    max_tokens_per_day: int = 2_000_000
    ingestion_enabled: bool = True
    ignore_projects: tuple[str, ...] = ()  # paths or globs of projects never read
    max_workers: int = 2  # detached workers alive at once, machine-wide (per Lore home)
    # The hub (issue 28, core/hubconfig.py): None is no hub, and nothing changes.
    hub_url: str | None = None  # checked: no password, TLS off loopback
    hub_space: str = "personal"  # where projects without a rule write
    hub_password_env: str | None = None
    hub_read: tuple[str, ...] = ()  # hub spaces recall reads; empty: the ones written to
    hub_routes: tuple[tuple[str, str], ...] = ()  # (project key or glob, space), first wins
    hub_connect_timeout: float = 3.0
    # Team sharing (issue 29, core/teamconfig.py): the member's [sharing] overrides of a
    # repository's .lore.toml, (project key or glob, space or "" to opt out), first wins.
    share_overrides: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = field(default=())  # problems found while loading, for status

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def lock_dir(self) -> Path:
        return self.home / "locks"

    def space_for(self, project: str | None) -> str:
        """The space `project`'s new knowledge goes to: "local" without a hub."""
        if not self.hub_url:
            return "local"
        from .hubconfig import route

        return route(self.hub_routes, self.hub_space, project)

    @property
    def hub_spaces(self) -> tuple[str, ...]:
        """The hub spaces recall reads: `[hub] read`, else every space something writes to."""
        if not self.hub_url:
            return ()
        named = self.hub_read or (self.hub_space, *(space for _, space in self.hub_routes))
        return tuple(dict.fromkeys(s for s in named if s != "local"))

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Never raises: a broken config file falls back to defaults and records a warning."""
    env = dict(os.environ) if env is None else env
    values, warnings = read_values(env)
    hub_table = values.pop("hub_table", None)
    if hub_table is not None or env.get("LORE_HUB_URL"):
        from .hubconfig import read_hub

        hub_values, hub_warnings = read_hub(hub_table, env)
        values.update(hub_values)
        warnings.extend(hub_warnings)
    sharing_table = values.pop("sharing_table", None)
    if sharing_table is not None:  # issue 29: a member's own sharing overrides
        from .teamconfig import read_sharing

        sharing_values, sharing_warnings = read_sharing(sharing_table)
        values.update(sharing_values)
        warnings.extend(sharing_warnings)
    db_path, home = Path(values.pop("db_path")), Path(values.pop("home"))
    return Settings(db_path=db_path, home=home, **values, warnings=tuple(warnings))
