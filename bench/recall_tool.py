"""The peer corpus loaded as a new user would load it: one `store_memory` call a note (the
date sits in the note's title, as the peer writes it; nothing else dates it), so every note
is created on the same day. Its queries are then asked through `query_memory`. This goes
through `Memory.store` and `Memory.query` with the arguments the MCP tools pass them
(lore_plugin/server/tools.py), without the JSON-RPC framing around them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lore_plugin.recall.memory import Memory

DAY = 86400.0


def peer_now(path: Path) -> float:
    """The day after the newest note, as the other loading uses."""
    newest = max(datetime.strptime(d["event_date"], "%Y-%m-%d").replace(tzinfo=UTC)
                 for d in json.loads(path.read_text())["documents"])
    return newest.timestamp() + DAY


def store_one_by_one(path: Path, db_path: Path, embedder: Any, now: float) -> dict[str, str]:
    """A fresh memory holding a topic per project (store_memory with depth 0) and every
    document stored under its project's topic (store_memory with parent_id and depth 1;
    summary = the title, "toast-analytics | 2025-01-10 | Tools: Read, Write", content = the
    text). Returns fragment id → document id."""
    for old in db_path.parent.glob(db_path.name + "*"):
        old.unlink()
    memory = Memory(db_path, embedder, clock=lambda: now, tz=UTC)
    topics: dict[str, str] = {}
    ids: dict[str, str] = {}
    try:
        for doc in json.loads(path.read_text())["documents"]:
            project = re.split(r"\s*\|\s*", doc.get("title", ""))[0].strip() or "notes"
            if project not in topics:
                topics[project] = memory.store(f"Work on the {project} project.", project,
                                               None, 0).id
            frag = memory.store(doc["content"], doc["title"], topics[project], 1)
            ids[frag.id] = doc["id"]
    finally:
        memory.close()
    return ids
