"""How a `lore` command opens the memory. It sits below both main.py and maint.py, which
both need it, so neither has to import the other."""

from __future__ import annotations

import os

from ..core.config import Settings


def open_memory(settings: Settings, project: str | None = None):  # noqa: ANN201
    from ..core.project import project_key
    from ..embedding.embedder import LocalEmbedder
    from ..recall.memory import Memory

    return Memory(settings.db_path, LocalEmbedder(settings.home / "models"),
                  project=project or project_key(os.getcwd()))
