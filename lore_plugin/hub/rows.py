"""A whole fragment as the hub reads it: store/rows.py's columns with the fragment's cues
(migration 7), and the row as a `Fragment` with them.

The local store keeps cues out of its search path's column list (store/rows.py: the hot
path reads no text), so the hub adds the column to its own full reads: every full read of a
hub fragment carries its cues and nothing is read twice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..core.cues import clean_cues
from ..core.types import Fragment
from ..safety.redact import redact
from ..store.backup import Backup
from ..store.rows import FRAGMENT_COLUMNS, FRAGMENT_NUMBERS, row_to_fragment


def _names(columns: str) -> list[str]:
    return [c.strip() for c in columns.split(",")]


COLUMNS = FRAGMENT_COLUMNS if "cues" in _names(FRAGMENT_COLUMNS) else FRAGMENT_COLUMNS + ", cues"
WIDTH = len(_names(COLUMNS))  # where what a query adds after the columns starts (a parent id)
NUMBERS_WIDTH = len(_names(FRAGMENT_NUMBERS))
_CUES = _names(COLUMNS).index("cues")
EXPORT_COLUMNS = Backup.EXPORT_COLUMNS  # a row of push and pull, cues included


def stored_cues(given: object) -> str:
    """Cues as the hub keeps them, from whatever a writer or a pushed row gave: redacted
    first (cut first, a secret split at a phrase's end could slip past redaction), then in
    clean_cues' form, which bounds them (core.cues.CUES_CHARS). Not text: none."""
    if isinstance(given, (list, tuple)):
        given = "\n".join(g for g in given if isinstance(g, str))
    return clean_cues(redact(given)) if isinstance(given, str) else ""


def to_fragment(row: Sequence[Any], parent_id: str | None = None) -> Fragment:
    """A row of COLUMNS (and anything after them) as a Fragment with its cues."""
    frag = row_to_fragment(row, parent_id)
    cues = row[_CUES] or ""
    return frag if frag.cues == cues else replace(frag, cues=cues)
