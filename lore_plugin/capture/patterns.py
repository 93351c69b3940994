"""The rule of three (issue 17): when the same kind of failure recurs in three distinct
sessions, consolidation records a pattern, and the SessionStart brief shows it in the projects
where it happened.

Two failures are the same kind when
- their normalised error kinds are equal ("ModuleNotFoundError", "module not found error" and
  "ModuleNotFound" all become "module not found"), and
- what broke is alike: the cosine similarity of the embeddings of "what broke" is at least
  WHAT_MATCH.
The kind alone is too coarse: an ImportError from a missing wheel and one from a circular import
are different lessons with different fixes. The text alone is too loose: "the build failed" is
close to every other build failure whatever broke it. Together they ask for the same error and
the same thing breaking. Without vectors (no model yet) the kind decides alone.

Clustering is greedy and in time order: each failure joins the first cluster of its kind whose
first failure it matches, so a cluster's members all resemble one anchor (no drifting chains).
Patterns are recomputed whole each cycle from the failure records, which keeps them consistent
with forgetting and merges without any bookkeeping of their own."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..recall.render import clip

if TYPE_CHECKING:
    from ..store import Store
    from .extract import Failure

SESSIONS_FOR_PATTERN = 3
# Measured with the model (tests/capture/test_loops.py phrasings): one breakage in other words
# 0.64-0.86; another breakage of the same kind ("no module named numpy" in a Docker build) 0.31.
WHAT_MATCH = 0.55
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[^a-z0-9]+")
# Words that say "this is an error" without saying which: dropped from the key.
_GENERIC = {"error", "errors", "exception", "failure", "failed", "fail", "err", "the", "a"}


def kind_key(kind: str) -> str:
    """The normalised error kind: camelCase split, lower case, punctuation and generic words
    ("error", "exception") dropped, dotted module prefixes ignored. Never empty."""
    last = kind.strip().split(".")[-1] if "." in kind and " " not in kind.strip() else kind
    words = _NOT_WORD.sub(" ", _CAMEL.sub(" ", last).lower()).split()
    kept = [w for w in words if w not in _GENERIC]
    return " ".join(kept or words) or "unknown"


def failure_rows(failures: list[Failure], vectors: dict[str, Any], session: str | None,
                 project: str | None, when: float) -> list[tuple[Any, ...]]:
    """An extraction's failures as Store.add_failure_records rows; `vectors` by "what". Their
    text is redacted here, so that none is redacted under the ingestor's write lock."""
    from ..embedding.embedder import to_blob
    from ..safety.redact import redact

    return [(session, project, redact(f.kind), kind_key(f.kind), redact(f.what),
             None if f.fix is None else redact(f.fix),
             None if vectors.get(f.what) is None else to_blob(vectors[f.what]), when)
            for f in failures]


@dataclass
class _Cluster:
    anchor: Any  # the first failure's vector, or None
    rows: list[tuple[Any, ...]] = field(default_factory=list)


def find_patterns(records: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Store.failure_records() → (kind, what, fix, sessions, first_seen, last_seen, projects)
    for each cluster seen in SESSIONS_FOR_PATTERN distinct sessions or more."""
    import numpy as np

    from ..core.types import EMBED_BYTES
    from ..embedding.embedder import from_blob

    clusters: dict[str, list[_Cluster]] = {}
    for row in records:
        blob = row[7]
        vector = from_blob(blob) if blob is not None and len(blob) == EMBED_BYTES else None
        for cluster in clusters.setdefault(row[4], []):
            if (vector is None or cluster.anchor is None
                    or float(np.dot(cluster.anchor, vector)) >= WHAT_MATCH):
                cluster.rows.append(row)
                break
        else:
            clusters[row[4]].append(_Cluster(vector, [row]))
    patterns = []
    for group in clusters.values():
        for cluster in group:
            sessions = {r[1] for r in cluster.rows if r[1]}
            if len(sessions) < SESSIONS_FOR_PATTERN:
                continue
            rows = cluster.rows
            fixes = [r[6] for r in rows if r[6]]
            # The latest fix that worked is the one worth repeating; the latest wording of
            # what broke is the one closest to how the project looks now.
            patterns.append((rows[-1][3], rows[-1][5], fixes[-1] if fixes else None,
                             len(sessions), rows[0][8], rows[-1][8],
                             sorted({r[2] for r in rows if r[2]})))
    return patterns


def consolidate_patterns(store: Store, dry_run: bool) -> dict[str, Any]:
    """Consolidation's pattern phase: recomputes the patterns and, unless a dry run, stores
    them. Returns the report entry's values."""
    patterns = find_patterns(store.failure_records())
    if not dry_run:
        store.replace_failure_patterns(patterns)
    return {"patterns": len(patterns),
            "items": [f"{clip(p[1], 80)} [{clip(p[0], 40)}] in {p[3]} sessions"
                      for p in patterns][:50]}


def brief_lines(store: Store, project: str | None, limit: int = 3) -> list[str]:
    """The brief's lines for the recurring failures of `project`."""
    lines = []
    for kind, what, fix, sessions in store.failure_patterns(project, limit):
        line = f"- recurring ({sessions} sessions): {clip(what, 120)} [{clip(kind, 40)}]"
        line += f"; what fixed it: {clip(fix, 160)}" if fix else "; no fix recorded yet"
        lines.append(line)
    return lines
