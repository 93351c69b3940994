"""`lore import FILE`: plan what a backup would add (every row checked, the tree kept a tree,
nothing counted twice), then add it in one transaction."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ..core.config import Settings
from ..core.errors import InvalidInput
from ..safety import importcheck
from ..safety.redact import redact
from ..store import Store
from .operations import FORMAT, VERSION, redact_or_none


@dataclass
class ImportPlan:
    fragments: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    watermarks: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    redirects: list[dict[str, Any]] = field(default_factory=list)
    skipped_fragments: int = 0
    skipped_edges: int = 0
    skipped_failures: int = 0
    skipped_redirects: int = 0
    failure_keys: set[tuple[Any, ...]] = field(default_factory=set)  # the file's, while planning
    seen: set[Any] = field(default_factory=set)  # fragment ids and edge keys the file gave
    marks: dict[str, dict[str, Any]] = field(default_factory=dict)  # watermark by file path
    problems: importcheck.Problems = field(default_factory=importcheck.Problems)
    lines: dict[int, int] = field(default_factory=dict)  # id(row) -> its line, while planning


def _lines(fh: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line), or None for a line over MAX_LINE bytes, which is read past in
    pieces and never held whole: one 300 MB line once took 945 MB to import."""
    number = 1
    while line := fh.readline(importcheck.MAX_LINE + 1):
        number += 1
        if len(line) <= importcheck.MAX_LINE or line.endswith(b"\n"):
            yield number, line
            continue
        while line and not line.endswith(b"\n"):
            line = fh.readline(1 << 20)
        yield number, None


def plan_import(settings: Settings, source: Path, now: float | None = None) -> ImportPlan:
    """What importing `source` would add. Every row is checked first (safety/importcheck.py): a bad
    row is skipped and counted with its reason, the good ones still import."""
    now = time.time() if now is None else now
    plan = ImportPlan()
    with open(source, "rb") as fh:
        _check_header(source, fh.readline(importcheck.MAX_LINE + 1))
        store = Store(settings.db_path, readonly=True)
        try:
            for number, line in _lines(fh):
                if line is None:
                    plan.problems.skip(number, importcheck.TOO_LONG)
                    continue
                if not line.strip():
                    continue
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    plan.problems.skip(number, "not JSON")
                    continue
                try:
                    _plan_record(store, record, plan, now, number)
                except importcheck.BadRow as exc:
                    plan.problems.skip(number, str(exc))
            _drop_dangling(store, plan)
            _keep_tree_shape(store, plan)
        finally:
            store.close()
    return plan


def _check_header(source: Path, line: bytes) -> None:
    try:
        header = orjson.loads(line or b"{}")
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InvalidInput(f"{source} is not a Lore export (no '{FORMAT}' header)")
    version = header.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidInput(f"{source} has an export version that is not a number")
    if version > VERSION:
        raise InvalidInput(f"{source} comes from a newer Lore (export version {version})")


def _plan_record(store: Store, record: Any, plan: ImportPlan, now: float, number: int) -> None:
    if not isinstance(record, dict):
        raise importcheck.BadRow("a line that is not a JSON object")
    if "fragment" in record:
        frag = importcheck.check_fragment(record["fragment"], now, plan.problems)
        if frag["id"] in plan.seen:  # counted once, as the database would take it once
            raise importcheck.BadRow("a fragment id that an earlier line gave already")
        plan.seen.add(frag["id"])
        if store.has_fragment(frag["id"]):
            plan.skipped_fragments += 1
            return
        # Redacted here, before the write, like the text the store redacts on insert.
        frag["metadata"] = orjson.dumps(importcheck.redacted(frag["metadata"])).decode()
        frag["project"] = redact_or_none(frag["project"])
        plan.fragments.append(frag)
        plan.lines[id(frag)] = number
    elif "edge" in record:
        edge = importcheck.check_edge(record["edge"], now, plan.problems)
        key = (edge["source"], edge["target"], edge["kind"])
        if key in plan.seen or ("edge", edge["id"]) in plan.seen:
            raise importcheck.BadRow("an edge that an earlier line gave already")
        plan.seen.update((key, ("edge", edge["id"])))
        if store.has_edge(*key):
            plan.skipped_edges += 1
        else:
            plan.edges.append(edge)
            plan.lines[id(edge)] = number
    elif "redirect" in record:
        moved = importcheck.check_redirect(record["redirect"])
        if ("redirect", moved["id"]) in plan.seen:
            raise importcheck.BadRow("a redirect id that an earlier line gave already")
        plan.seen.add(("redirect", moved["id"]))
        if store.known_ids([moved["id"]]):  # already a redirect here, or a fragment's own id
            plan.skipped_redirects += 1
        else:
            plan.redirects.append(moved)
            plan.lines[id(moved)] = number
    elif "watermark" in record:
        mark = importcheck.check_watermark(record["watermark"], now, plan.problems)
        if mark["file_path"] in plan.marks:  # one row per file, as the upsert keeps the larger
            earlier = plan.marks[mark["file_path"]]
            earlier["byte_offset"] = max(earlier["byte_offset"], mark["byte_offset"])
        else:
            plan.marks[mark["file_path"]] = mark
            plan.watermarks.append(mark)
    elif "failure" in record:
        failure = importcheck.check_failure(record["failure"], now, plan.problems)
        for field_name in ("kind", "what", "fix", "session_id", "project"):  # as stored
            text = failure[field_name]
            failure[field_name] = None if text is None else redact(text)
        same = (failure["session_id"], failure["kind"], failure["what"], failure["created_at"])
        if same in plan.failure_keys or store.has_failure(*same):
            plan.skipped_failures += 1
        else:
            plan.failure_keys.add(same)
            plan.failures.append(failure)
    else:
        raise importcheck.BadRow("a record that is none of fragment, edge, redirect, "
                                 "watermark or failure")


def _drop_dangling(store: Store, plan: ImportPlan) -> None:
    """An edge must join two fragments that exist after the import (the foreign key would
    otherwise fail the whole import); a supersession pointer to a fragment that will not
    exist is dropped, the fragment itself kept."""
    incoming = {f["id"] for f in plan.fragments}

    def known(fid: str) -> bool:
        return fid in incoming or store.has_fragment(fid)

    kept = []
    for edge in plan.edges:
        if known(edge["source"]) and known(edge["target"]):
            kept.append(edge)
        else:
            plan.problems.skip(plan.lines.get(id(edge), 0), "edge names a fragment that is "
                               "neither in the file nor in the database")
    plan.edges = kept
    moved = []  # a redirect leads to a fragment that exists, and is no fragment's own id
    for redirect in plan.redirects:
        if redirect["id"] in incoming:
            plan.problems.skip(plan.lines.get(id(redirect), 0), "redirect id is a fragment's "
                               "own id in the file")
        elif not known(redirect["target"]):
            plan.problems.skip(plan.lines.get(id(redirect), 0), "redirect target is neither "
                               "in the file nor in the database")
        else:
            moved.append(redirect)
    plan.redirects = moved
    for frag in plan.fragments:
        if frag["superseded_by"] is not None and not known(frag["superseded_by"]):
            frag["superseded_by"] = None
            plan.problems.clamped["superseded_by (unknown fragment, dropped)"] += 1


def _keep_tree_shape(store: Store, plan: ImportPlan) -> None:
    """The hierarchy must stay a tree and supersession chains must end: an edge that gives a
    fragment a second parent or closes a loop (A→B→C→A) is skipped, and a supersession
    pointer that closes a loop is dropped (the fragment kept). A loop made export, forgetting
    and the topic counts fail or miscount."""
    parents, kept = store.parent_links(), []
    for edge in plan.edges:
        why = (importcheck.joins_tree(parents, edge["source"], edge["target"])
               if edge["kind"] == "hierarchical" else None)
        if why:
            plan.problems.skip(plan.lines.get(id(edge), 0), why)
        else:
            kept.append(edge)
    plan.edges = kept
    newer = store.supersession_links()
    for frag in plan.fragments:
        if frag["superseded_by"] is None:
            continue
        if importcheck.reaches(newer, frag["superseded_by"], frag["id"]):
            frag["superseded_by"] = None
            plan.problems.dropped["a superseded_by that would close a loop of versions"] += 1
        else:
            newer[frag["id"]] = frag["superseded_by"]
    plan.lines.clear()


def apply_import(settings: Settings, plan: ImportPlan) -> None:
    from ..capture.patterns import kind_key

    store = Store(settings.db_path)
    try:
        store.import_rows(plan.fragments, plan.edges, plan.watermarks, plan.redirects)
        if plan.failures:  # own transaction: they name no fragment, and a rerun skips them
            store.add_failure_records([
                (f["session_id"], f["project"], f["kind"], kind_key(f["kind"]), f["what"],
                 f["fix"], f["embedding"], f["created_at"]) for f in plan.failures])
    finally:
        store.close()
