"""How a `lore` command opens the memory, and fills the cue vectors it made due. It sits
below both main.py and maint.py, which both need it, so neither has to import the other."""

from __future__ import annotations

import os

from ..core.config import Settings


def open_memory(settings: Settings, project: str | None = None):  # noqa: ANN201
    from ..core.project import project_key
    from ..embedding.embedder import LocalEmbedder
    from ..recall.memory import Memory

    return Memory(settings.db_path, LocalEmbedder(settings.home / "models"),
                  project=project or project_key(os.getcwd()))


def fill_cue_vectors(memory) -> int:  # noqa: ANN001 - a recall.memory.Memory
    """The vectors of cues this command wrote (recall/cue_vector_fill.py), after its
    commit; with no model, or on a failure, they stay due for the memory service."""
    from ..recall.cue_vector_fill import fill_cue_vectors as fill

    if not memory.embedder_ready():
        return 0
    try:
        return fill(memory.writer, memory.embedder)
    except Exception as exc:  # noqa: BLE001 - left due: one line, never a traceback
        print(f"cue vectors not filled now ({exc}); the memory service will fill them")
        return 0
