"""How a `lore` command opens the memory. It sits below both cli.py and cli_maint.py, which
both need it, so neither has to import the other."""

from __future__ import annotations

import os

from .config import Settings


def open_memory(settings: Settings, project: str | None = None):  # noqa: ANN201
    from .embedding import LocalEmbedder
    from .memory import Memory
    from .project import project_key

    return Memory(settings.db_path, LocalEmbedder(settings.home / "models"),
                  project=project or project_key(os.getcwd()))
