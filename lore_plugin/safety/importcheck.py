"""Checking the rows of a `lore import` file before any of them reaches the database.

An export is a plain text file that anyone can edit, and the rest of Lore trusts the database:
one vector of the wrong length made every vector query and every ingestion batch fail, and a
relevance of 99 pinned a topic first in every brief. So each row is checked here: a row that
cannot be used as it is (wrong shape, wrong type, not finite) is skipped with a reason, and a
number that is merely out of range is clamped into it (the knowledge is kept, its weight made
sane). Standard library only: numpy is not needed to check 384 floats.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
import sys
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..core.cues import CUES_CHARS, clean_cues
from ..core.relevance import MIN_DECAY, relevance
from ..core.types import EMBED_BYTES, EMBED_DIM
from .redact import redact

# new_id() writes 32 lowercase hex digits; a uuid4 in its usual dashed form is accepted too.
_ID = re.compile(r"^(?:[0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                 r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")
_SESSION = re.compile(r"^[A-Za-z0-9_-]{1,128}$")  # as the hooks accept a session id
MAX_DEPTH = 8  # as deep as recall looks (memory.MAX_DEPTH)
MAX_TEXT = 1 << 20  # characters of content or summary; real fragments are a few hundred
MAX_PATH = 4096
MAX_ACCESS = 1_000_000
MAX_DECAY = 1.0  # per day: gone within days; the fastest built-in level is 0.07
EDGE_KINDS = frozenset({"hierarchical", "associative", "temporal", "supersedes"})
EXAMPLE_LINES = 3  # line numbers quoted per reason
# A line is read whole to be parsed, so its size is bounded: a fragment at MAX_TEXT in both
# content and summary, escaped, fits; an export's real lines are a few KB.
MAX_LINE = 16 << 20
TOO_LONG = f"a line longer than {MAX_LINE >> 20} MiB (the import limit per line; it was not read)"


class BadRow(ValueError):
    """A row that cannot be imported; the message is the reason shown to the user."""


@dataclass
class Problems:
    """What was wrong in a file: reasons of skipped rows with example line numbers, and how
    many values were clamped into range."""

    skipped: Counter[str] = field(default_factory=Counter)
    lines: dict[str, list[int]] = field(default_factory=dict)
    clamped: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)  # a bad value left out, row kept

    def skip(self, line: int, reason: str) -> None:
        self.skipped[reason] += 1
        examples = self.lines.setdefault(reason, [])
        if len(examples) < EXAMPLE_LINES:
            examples.append(line)

    @property
    def skipped_rows(self) -> int:
        return sum(self.skipped.values())

    def describe(self) -> list[str]:
        """One line per reason, most frequent first, for the CLI."""
        out = []
        for reason, count in self.skipped.most_common():
            where = ", ".join(map(str, self.lines.get(reason, [])))
            more = ", ..." if count > len(self.lines.get(reason, [])) else ""
            out.append(f"{count} skipped: {reason} (line {where}{more})")
        for reason, count in self.dropped.most_common():
            out.append(f"{count} kept without it: {reason}")
        if self.clamped:
            fields = ", ".join(f"{name} {n}" for name, n in sorted(self.clamped.items()))
            out.append(f"{sum(self.clamped.values())} values out of range were adjusted "
                       f"({fields})")
        return out


def _number(row: dict[str, Any], key: str, low: float, high: float, problems: Problems,
            default: float | None = None) -> float:
    value = row.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRow(f"{key} is not a number")
    if not math.isfinite(value):
        raise BadRow(f"{key} is not finite")
    if value < low or value > high:
        problems.clamped[key] += 1
        return min(max(float(value), low), high)
    return float(value)


def _count(row: dict[str, Any], key: str, high: int, problems: Problems) -> int:
    value = row.get(key, 0)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRow(f"{key} is not a whole number")
    if not 0 <= value <= high:
        problems.clamped[key] += 1
        return min(max(value, 0), high)
    return value


def _id(value: Any, key: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not _ID.match(value):
        raise BadRow(f"{key} is not a Lore id")
    return value


def _text(value: Any, key: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise BadRow(f"{key} is not text")
    if len(value) > MAX_TEXT:
        raise BadRow(f"{key} is longer than {MAX_TEXT:,} characters")
    if "\x00" in value:
        raise BadRow(f"{key} holds a NUL character")
    return value


def _cues(value: Any, problems: Problems) -> str:
    """A row's cues (core/cues.py) in their normal form; none in an export from before them.
    Cues that are not text, hold a NUL or are longer than a note's can be are left out, and
    the row kept: they only help find it."""
    if value is None:
        return ""
    if not isinstance(value, str) or "\x00" in value:
        problems.dropped["cues that are not text"] += 1
        return ""
    if len(value) > CUES_CHARS:
        problems.dropped[f"cues longer than {CUES_CHARS} characters"] += 1
        return ""
    return clean_cues(value)


def _embedding(value: Any, problems: Problems) -> bytes | None:
    """The vector, or None when there is none or it is unusable: the fragment is kept without
    it (its text is the knowledge; `lore doctor --fix` embeds it again)."""
    if value is None or value == "":
        return None
    blob = None
    if isinstance(value, str):
        try:
            blob = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            pass
    if blob is None:
        problems.dropped["an embedding that is not base64 text"] += 1
        return None
    if len(blob) != EMBED_BYTES:
        problems.dropped[f"an embedding that is not {EMBED_BYTES:,} bytes "
                         f"({EMBED_DIM} float32 values)"] += 1
        return None
    floats = array("f")
    floats.frombytes(blob)
    if sys.byteorder != "little":  # pragma: no cover
        floats.byteswap()  # blobs are little-endian float32 (embedding.to_blob)
    if not all(map(math.isfinite, floats)):
        problems.dropped["an embedding with values that are not finite"] += 1
        return None
    return blob


def check_fragment(row: Any, now: float, problems: Problems) -> dict[str, Any]:
    """The fragment ready for Store.import_rows (embedding as bytes, metadata as JSON text
    is left to the caller), or BadRow. Timestamps after `now` are clamped to it: a future
    last_reinforced would never decay."""
    if not isinstance(row, dict):
        raise BadRow("fragment is not a JSON object")
    frag: dict[str, Any] = {"id": _id(row.get("id"), "id")}
    frag["content"] = _text(row.get("content"), "content")
    summary = _text(row.get("summary"), "summary")
    if not summary or not summary.strip():
        raise BadRow("summary is empty")
    frag["summary"] = summary
    depth = row.get("depth")
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH:
        raise BadRow(f"depth is not a whole number from 0 to {MAX_DEPTH}")
    frag["depth"] = depth
    frag["embedding"] = _embedding(row.get("embedding"), problems)
    created = _number(row, "created_at", 0.0, now, problems)
    frag["created_at"] = created
    # Missing use times fall back to the creation time, as a fragment never used has them.
    frag["last_accessed"] = _number(row, "last_accessed", 0.0, now, problems, default=created)
    frag["last_reinforced"] = _number(row, "last_reinforced", 0.0, now, problems,
                                      default=created)
    frag["access_count"] = _count(row, "access_count", MAX_ACCESS, problems)
    frag["importance"] = _number(row, "importance", 0.0, 1.0, problems, default=0.5)
    frag["decay_rate"] = _number(row, "decay_rate", MIN_DECAY, MAX_DECAY, problems, default=0.03)
    # No higher than these very values allow today: a stored score is only a cache of the
    # formula, and one above it would rank the fragment first until consolidation reran.
    ceiling = relevance(frag["importance"], frag["access_count"], frag["decay_rate"],
                        frag["last_reinforced"], now)
    frag["relevance_score"] = _number(row, "relevance_score", 0.0, ceiling, problems,
                                      default=ceiling)
    frag["source_session"] = row.get("source_session")
    if frag["source_session"] is not None and (not isinstance(frag["source_session"], str)
                                               or not _SESSION.match(frag["source_session"])):
        raise BadRow("source_session is not a session id")
    frag["superseded_by"] = _id(row.get("superseded_by"), "superseded_by", optional=True)
    if frag["superseded_by"] == frag["id"]:
        raise BadRow("superseded_by names the fragment itself")
    project = _text(row.get("project"), "project", optional=True)
    if project is not None and len(project) > MAX_PATH:
        raise BadRow(f"project is longer than {MAX_PATH} characters")
    frag["project"] = project
    metadata = row.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise BadRow("metadata is not a JSON object")
    frag["metadata"] = metadata or {}
    frag["cues"] = _cues(row.get("cues"), problems)
    # Provenance is checked where it is written (store/backup.py): a row from Lore's own backup
    # keeps its source, anything else is labelled as imported.
    for key in ("source", "basis", "confirmed_at"):
        if key in row:
            frag[key] = row[key]
    return frag


def check_edge(row: Any, now: float, problems: Problems) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise BadRow("edge is not a JSON object")
    edge: dict[str, Any] = {"id": _id(row.get("id"), "edge id")}
    edge["source"] = _id(row.get("source"), "edge source")
    edge["target"] = _id(row.get("target"), "edge target")
    if edge["source"] == edge["target"]:
        raise BadRow("edge links a fragment to itself")
    kind = row.get("kind")
    if kind not in EDGE_KINDS:
        raise BadRow(f"edge kind is not one of {', '.join(sorted(EDGE_KINDS))}")
    edge["kind"] = kind
    edge["weight"] = _number(row, "weight", 0.0, 1.0, problems, default=1.0)
    edge["created_at"] = _number(row, "created_at", 0.0, now, problems)
    return edge


def check_redirect(row: Any) -> dict[str, str]:
    """An id store_memory gave out for a store that repeated `target` (fragment_redirects).
    The id is kept lowercase, as Store.resolve_id looks it up."""
    if not isinstance(row, dict):
        raise BadRow("redirect is not a JSON object")
    moved = {"id": str(_id(row.get("id"), "redirect id")).lower(),
             "target": str(_id(row.get("target"), "redirect target"))}
    if moved["id"] == moved["target"].lower():
        raise BadRow("redirect points to itself")
    return moved


def check_failure(row: Any, now: float, problems: Problems) -> dict[str, Any]:
    """A learning-loop failure record (what broke in a session, its kind, the fix)."""
    if not isinstance(row, dict):
        raise BadRow("failure is not a JSON object")
    out: dict[str, Any] = {}
    for key in ("kind", "what"):
        text = _text(row.get(key), f"failure {key}")
        if not text or not text.strip():
            raise BadRow(f"failure {key} is empty")
        out[key] = text
    out["fix"] = _text(row.get("fix"), "failure fix", optional=True)
    for key in ("session_id", "project"):
        value = _text(row.get(key), f"failure {key}", optional=True)
        if value is not None and len(value) > MAX_PATH:
            raise BadRow(f"failure {key} is longer than {MAX_PATH:,} characters")
        out[key] = value
    out["embedding"] = _embedding(row.get("embedding"), problems)
    out["created_at"] = _number(row, "created_at", 0.0, now, problems)
    return out


def check_watermark(row: Any, now: float, problems: Problems) -> dict[str, Any]:
    """A watermark past the end of its transcript would hide everything written there later
    (the Stop hook and ingestion both wait for the file to grow past it); one for a file that
    is not on this machine is kept, as it is harmless until that file appears."""
    if not isinstance(row, dict):
        raise BadRow("watermark is not a JSON object")
    path = row.get("file_path")
    if (not isinstance(path, str) or not path or len(path) > MAX_PATH or "\x00" in path
            or not os.path.isabs(path) or os.path.normpath(path) != path):
        raise BadRow("watermark file_path is not a plain absolute path")
    offset = row.get("byte_offset")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise BadRow("watermark byte_offset is not a whole number of bytes")
    try:
        size = os.stat(path).st_size
    except OSError:
        size = None
    if size is not None and offset > size:
        raise BadRow("watermark lies beyond the end of its transcript")
    return {"file_path": path, "byte_offset": offset,
            "last_processed": _number(row, "last_processed", 0.0, now, problems)}


def redacted(value: Any) -> Any:
    """A JSON value (an imported row's metadata) with every string in it, keys too, redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redacted(v) for v in value]
    if isinstance(value, dict):
        # A plain str key: orjson writes str subclasses (Redacted) as values, never as keys.
        return {str(redact(str(k))): redacted(v) for k, v in value.items()}
    return value


def reaches(pointers: dict[str, str], start: str, goal: str) -> bool:
    """Whether following `pointers` (child -> parent, or old -> newer) from `start` comes to
    `goal`. Stops at a fragment seen before, so a loop already in the data cannot hang it."""
    seen: set[str] = set()
    node: str | None = start
    while node is not None and node not in seen:
        if node == goal:
            return True
        seen.add(node)
        node = pointers.get(node)
    return False


def joins_tree(parents: dict[str, str], parent: str, child: str) -> str | None:
    """Why the hierarchical edge parent→child cannot join the tree `parents` (child -> parent),
    or None, and then it is added to `parents`."""
    if child in parents:
        return "edge gives a fragment a second parent"
    if reaches(parents, parent, child):
        return "edge would close a loop in the hierarchy (a fragment its own ancestor)"
    parents[child] = parent
    return None
