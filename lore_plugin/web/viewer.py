"""What every route shares: the memory engine, its curator, the run's secrets, and the rule
that one thread at a time touches the engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import anyio.to_thread
from starlette.requests import Request

from ..core.config import Settings
from ..maintenance.curation import Curator
from ..recall.memory import Memory
from ..recall.spaces import Spaces
from .security import Secrets

T = TypeVar("T")


@dataclass
class Viewer:
    """What the routes share: the memory engine, its curator, the run's secrets, and a
    one-slot message shown on the next page (one user, one browser)."""

    settings: Settings
    memory: Memory
    secrets: Secrets
    curator: Curator = field(init=False)
    flash: str = ""
    # One thread at a time touches the engine: its connections are not shared between
    # threads, and the viewer is one person's tool.
    limiter: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(1))

    _spaces: Spaces | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.curator = Curator(self.memory)

    def spaces(self) -> Spaces | None:
        """With a hub configured, the local file and the hub spaces searched as one."""
        if self._spaces is None and self.settings.hub_url:
            from ..capture.hub_link import spaces_for

            self._spaces = spaces_for(self.settings, self.memory)
        return self._spaces

    async def run(self, fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn, limiter=self.limiter)

    def take_flash(self) -> str:
        text, self.flash = self.flash, ""
        return text


def viewer_of(request: Request) -> Viewer:
    return request.app.state.viewer  # type: ignore[no-any-return]
