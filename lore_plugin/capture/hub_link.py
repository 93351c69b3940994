"""How the surfaces reach the hub's spaces: the connection string with its password, one
space's store and memory, and the Spaces a session reads (issue 28).

The hub package (hub/) is the backend; this is the one place outside it that builds a HubStore
from the settings (in capture/: the lowest layer that may import both the hub and the engine),
so the CLI, the server, the hooks and the worker open a space the same way.
The password, when `[hub] password_env` names one, is added to the connection string here, in
memory only: it is never written, logged or shown (hub errors show the URL without it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from ..core.config import Settings
from ..core.errors import ConfigError
from ..embedding.embedder import Embedder
from ..recall.memory import Memory
from ..recall.spaces import LOCAL, Spaces

if TYPE_CHECKING:
    from ..hub import HubStore


def conninfo(settings: Settings) -> str:
    """The URL to connect with; ConfigError when no hub is configured or the password the
    config points to is missing. Without password_env, libpq finds one itself (PGPASSWORD,
    ~/.pgpass, a service file) or a client certificate is used."""
    if not settings.hub_url:
        raise ConfigError("no hub is configured: set [hub] url in config.toml or LORE_HUB_URL")
    if not settings.hub_password_env:
        return settings.hub_url
    password = os.environ.get(settings.hub_password_env)
    if not password:
        raise ConfigError(f"[hub] password_env names {settings.hub_password_env}, which is "
                          "not set")
    joiner = "&" if "?" in settings.hub_url else "?"
    return settings.hub_url + joiner + urlencode({"password": password})


def open_store(settings: Settings, space: str, create: bool = False,
               read_only: bool = False) -> HubStore:
    """One hub space's store; HubError (unreachable, no pgvector, newer schema, unknown
    space) when it cannot be had. read_only: the server refuses any write through it."""
    from ..hub import HubStore, read_only_url

    url = conninfo(settings)
    return HubStore(read_only_url(url) if read_only else url, space,
                    create_space=create and not read_only)


def open_memory(settings: Settings, space: str, embedder: Embedder | None,
                clock: Callable[[], float] | None = None, project: str | None = None) -> Memory:
    store = open_store(settings, space)
    kwargs = {"clock": clock} if clock is not None else {}
    return Memory(store, embedder, project=project, **kwargs)  # type: ignore[arg-type]


def spaces_for(settings: Settings, local: Memory, timeout: float | None = None) -> Spaces:
    """The local memory and every hub space the settings read, each opened on first use."""
    hubs = {space: (lambda space=space: open_memory(settings, space, local.embedder,  # type: ignore[misc]
                                                    local.clock, local.project))
            for space in settings.hub_spaces}
    return Spaces(local, hubs, timeout=timeout or settings.hub_connect_timeout + 2.0)


def write_space(settings: Settings, project: str | None) -> str:
    """Where `project`'s new knowledge goes: LOCAL without a hub or when routed there."""
    return settings.space_for(project) if settings.hub_url else LOCAL
