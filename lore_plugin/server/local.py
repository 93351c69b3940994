"""The front's fallback: the tools run in the front's own process, as the in-process server
runs them (one Memory, its warm-up, the per-prompt socket), for a session whose memory service
cannot be had. Made the first time it is needed; it loads what the service would have."""

from __future__ import annotations

import os
import threading
from typing import Any

from ..recall.memory import Memory
from ..service import spaced
from ..service.answers import run_tool
from ..service.engine import Service
from .team import open_socket  # with the repository's team space, if it shares


class Local:
    def __init__(self, service: Service, close_socket: Any) -> None:
        self.service, self._close_socket = service, close_socket

    @classmethod
    def open(cls, settings: Any, project: str) -> Local:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        import numpy  # noqa: F401  (before the warm-up thread: see tools.main)

        from ..embedding.embedder import LocalEmbedder

        memory = Memory(settings.db_path, LocalEmbedder(settings.home / "models"),
                        project=project)
        service = Service(memory)
        spaced.attach(service, settings)  # with a hub: its spaces are read and routed to
        close_socket = open_socket(settings, service.lock, memory, service.warm)

        def warm() -> None:
            service.warm_up()
            service.warm.set()

        threading.Thread(target=warm, name="lore-warm-up", daemon=True).start()
        return cls(service, close_socket)

    def run(self, name: str, arguments: object) -> dict[str, Any]:
        return run_tool(self.service, name, arguments, None)

    def close(self) -> None:
        self._close_socket()
        self.service.close()
