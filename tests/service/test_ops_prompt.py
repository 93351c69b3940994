"""The memory service serves every session of the machine: a per-prompt request names its
session's folder, and the notes are ranked for that folder's project, not for whichever
project the last call happened to leave on the shared Memory."""

from __future__ import annotations

from pathlib import Path

from lore_plugin.core.project import project_key
from lore_plugin.core.types import NewFragment
from lore_plugin.recall.memory import Memory
from lore_plugin.service.engine import Service
from lore_plugin.service.ops import Ops
from lore_plugin.store import Store


def test_a_prompt_is_answered_for_the_project_of_the_folder_it_names(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    store = Store(db)
    store.insert(NewFragment(content="Invoices are kept in PostgreSQL 16",
                             summary="Invoices are kept in PostgreSQL 16", depth=2), now=1.7e9)
    store.close()
    first, second = tmp_path / "billing", tmp_path / "gateway"
    first.mkdir()
    second.mkdir()
    engine = Service(Memory(db, None))  # no model: the notes are found by words
    ops = Ops(engine, "test")
    try:
        for folder in (first, second, first):
            ops.answer("prompt", {}, None, {"prompt": "where are invoices kept?", "seen": [],
                                            "cwd": str(folder)})
            assert engine.memory.project == project_key(str(folder))
        # A request without a folder (an older hook) leaves the project as it was.
        ops.answer("prompt", {}, None, {"prompt": "where are invoices kept?", "seen": []})
        assert engine.memory.project == project_key(str(first))
    finally:
        ops.teams.close()
        engine.close()
