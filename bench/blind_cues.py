"""Cues for the benchmark sets' notes (issue 30), for `--cues PATH` of bench_recall.py and
bench_prompt_recall.py: bench/data/blind_cues.json, {"cues": {key: [phrase, ...]}}, written by
models that saw the notes and never a question. A note gets its cues through the real field
(NewFragment.cues, store_knowledge(cues=...)), as extraction or store_memory would give them.

Keys: a paraphrase note's own key, "peer-" + a peer document's id, "newuser-" + a newuser
note's id, "locomo-" + a LoCoMo sample's id + "-" + a turn's id ("locomo-conv-26-D1:3", in
bench/data/locomo_cues.json: what consolidation's cue writing would give the turns, written the
same blind way). Without --cues no note has any, and the runs are those of main."""

from __future__ import annotations

import json
from pathlib import Path

from lore_plugin.core.cues import clean_cues

DEFAULT = Path(__file__).resolve().parent / "data" / "blind_cues.json"
LOCOMO = DEFAULT.parent / "locomo_cues.json"
PREFIX = {"peer": "peer-", "newuser": "newuser-"}  # by corpus name; the paraphrase set: none
_loaded: dict[str, list[str]] = {}


def use(paths: list[Path] | Path | None) -> int:
    """Gives the notes the cues in `paths` from now on (None: none). How many notes have some."""
    _loaded.clear()
    for path in [paths] if isinstance(paths, Path) else paths or []:
        _loaded.update(json.loads(path.read_text())["cues"])
    return sum(1 for phrases in _loaded.values() if phrases)


def _prefix(corpus: str) -> str:
    if corpus.startswith("locomo-"):  # bench_recall.load_locomo: "locomo-<index>-<sample id>"
        return "locomo-" + corpus.split("-", 2)[2] + "-"
    return PREFIX.get(corpus, "")


def of(corpus: str, key: str) -> str:
    """The cues of note `key` of the corpus named `corpus`, as stored (clean_cues's form)."""
    return clean_cues(_loaded.get(_prefix(corpus) + key))
