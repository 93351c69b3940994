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

    def __post_init__(self) -> None:
        self.curator = Curator(self.memory)

    async def run(self, fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(fn, limiter=self.limiter)

    def take_flash(self) -> str:
        text, self.flash = self.flash, ""
        return text


def viewer_of(request: Request) -> Viewer:
    return request.app.state.viewer  # type: ignore[no-any-return]
