"""Cues for the benchmark sets' notes (issue 30), for `--cues PATH` of bench_recall.py and
bench_prompt_recall.py: bench/data/blind_cues.json, {"cues": {key: [phrase, ...]}}, written by
models that saw the notes and never a question. A note gets its cues through the real field
(NewFragment.cues, store_knowledge(cues=...)), as extraction or store_memory would give them.

Keys: a paraphrase note's own key, "peer-" + a peer document's id, "newuser-" + a newuser
note's id. Without --cues no note has any, and the runs are those of main."""

from __future__ import annotations

import json
from pathlib import Path

from lore_plugin.core.cues import clean_cues

DEFAULT = Path(__file__).resolve().parent / "data" / "blind_cues.json"
PREFIX = {"peer": "peer-", "newuser": "newuser-"}  # by corpus name; the paraphrase set: none
_loaded: dict[str, list[str]] = {}


def use(path: Path | None) -> int:
    """Gives the notes the cues in `path` from now on (None: none). How many notes have some."""
    _loaded.clear()
    if path is not None:
        _loaded.update(json.loads(path.read_text())["cues"])
    return len(_loaded)


def of(corpus: str, key: str) -> str:
    """The cues of note `key` of the corpus named `corpus`, as stored (clean_cues's form)."""
    return clean_cues(_loaded.get(PREFIX.get(corpus, "") + key))
