"""Inspection and repair: doctor, export/import, and forgetting on request."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..core import private
from ..core.config import Settings
from ..core.errors import InvalidInput
from ..core.locks import FileLock, temp_sibling
from ..core.private import create_private
from ..core.types import EMBED_BYTES
from ..embedding import vector_snapshot
from ..recall.render import clip, short_id
from ..safety import importcheck
from ..safety.redact import redact
from ..store import Store

FORMAT = "lore-export"
VERSION = 1
WAL_WARN_BYTES = 64 * 1024 * 1024


@dataclass
class Finding:
    check: str
    ok: bool
    detail: str
    fixed: bool = False


@dataclass
class ImportPlan:
    fragments: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    watermarks: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    skipped_fragments: int = 0
    skipped_edges: int = 0
    skipped_failures: int = 0
    failure_keys: set[tuple[Any, ...]] = field(default_factory=set)  # the file's, while planning
    problems: importcheck.Problems = field(default_factory=importcheck.Problems)
    lines: dict[int, int] = field(default_factory=dict)  # id(row) -> its line, while planning


def doctor(settings: Settings, fix: bool = False, embed: Callable[[Store], int] | None = None
           ) -> list[Finding]:
    """Every check reports; with `fix`, each repairable problem is repaired in place."""
    found: list[Finding] = [_file_modes(settings, fix)]
    if not settings.db_path.exists():
        return [*found, Finding("database", True,
                                f"{settings.db_path} does not exist yet (nothing to check)")]
    store = Store(settings.db_path)
    try:
        problems = [p for p in store.integrity_check() if p != "ok"]
        found.append(Finding("integrity", not problems,
                             "; ".join(problems[:5]) or "PRAGMA integrity_check ok"))
        fts_ok = store.fts_consistent()
        finding = Finding("fts index", fts_ok, "in step with fragments" if fts_ok else "out of step")
        if not fts_ok and fix:
            store.rebuild_fts()
            finding.fixed = store.fts_consistent()
        found.append(finding)
        orphans, dangling = store.orphan_edges(), store.dangling_supersessions()
        finding = Finding("graph", not orphans and not dangling,
                          f"{len(orphans)} orphan edges, {len(dangling)} dangling supersessions")
        if (orphans or dangling) and fix:
            store.repair_graph(orphans, dangling)
            finding.fixed = True
        found.append(finding)
        wrong = store.wrong_length_embeddings(EMBED_BYTES)
        finding = Finding("vectors", not wrong, f"{len(wrong)} vectors of the wrong length "
                          f"(not {EMBED_BYTES} bytes; search leaves them out)")
        if wrong and fix:
            store.clear_embeddings(wrong)  # the embeddings check below embeds them again
            finding.fixed = True
        found.append(finding)
        missing = store.counts()["without_embedding"]
        finding = Finding("embeddings", missing == 0, f"{missing} fragments without a vector")
        if missing and fix and embed is not None:
            done = embed(store)
            finding.fixed = done >= missing
            finding.detail += f"; embedded {done}"
        found.append(finding)
        wal = store.wal_bytes()
        finding = Finding("wal", wal < WAL_WARN_BYTES, f"WAL is {wal / 1e6:.1f} MB")
        if wal >= WAL_WARN_BYTES and fix:
            store.checkpoint()
            finding.fixed = True
        found.append(finding)
        parked = store.failures(parked_only=True)
        found.append(Finding("ingestion", not parked, f"{len(parked)} parked batches"
                             + (" (retry: lore ingest --retry-failed)" if parked else "")))
    finally:
        store.close()
    found.append(_stale_locks(settings, fix))
    return found


def _file_modes(settings: Settings, fix: bool) -> Finding:
    """Everything under LORE_HOME, and the database wherever it is, is owner-only."""
    loose = private.loose_paths(settings.home, settings.db_path, deep=True)
    if not loose:
        return Finding("file modes", True, "owner-only (no group or other access)")
    shown = ", ".join(str(p) for p in loose[:3]) + (" …" if len(loose) > 3 else "")
    finding = Finding("file modes", False, f"{len(loose)} paths readable by others: {shown}")
    if fix:
        private.repair(settings.home, settings.db_path, deep=True)
        left = private.loose_paths(settings.home, settings.db_path, deep=True)
        finding.fixed = not left
        finding.detail += "; made owner-only" if not left else f"; {len(left)} could not be changed"
    return finding


def _stale_locks(settings: Settings, fix: bool) -> Finding:
    """Lock files are freed by the OS when their holder dies, so a lock file nobody holds is
    harmless; a held one whose recorded PID is gone would be a real problem."""
    held, stale = [], []
    for path in sorted(settings.lock_dir.glob("*.lock")) if settings.lock_dir.exists() else []:
        if FileLock(path).is_held_elsewhere():
            held.append(path.name)
        else:
            stale.append(path)
    if fix:
        for path in stale:
            path.unlink(missing_ok=True)
    detail = f"{len(held)} held by running workers, {len(stale)} unused lock files"
    return Finding("locks", True, detail + (" (removed)" if fix and stale else ""), fixed=bool(fix and stale))


def export(settings: Settings, out: Path) -> dict[str, int]:
    """JSON Lines: a header, then one record per fragment, edge, watermark and learning-loop
    failure (patterns are drawn from the failures again by the next consolidation). Vectors
    are base64 float32, so a round trip does not even need the model."""
    store = Store(settings.db_path, readonly=True)
    counts = {"fragments": 0, "edges": 0, "watermarks": 0, "failures": 0}
    tmp = temp_sibling(out)
    fd = create_private(tmp)  # before `try`: a name we could not create is not ours to remove
    try:
        with store.read(), open(fd, "wb") as fh:
            fh.write(orjson.dumps({"format": FORMAT, "version": VERSION, "exported_at": time.time()}) + b"\n")
            for frag in store.export_fragments():
                if frag["embedding"] is not None:
                    frag["embedding"] = base64.b64encode(frag["embedding"]).decode()
                frag["metadata"] = orjson.loads(frag["metadata"] or "{}")
                # Rows kept before every write was redacted are scrubbed on their way out.
                frag["summary"], frag["content"] = redact(frag["summary"]), redact(frag["content"])
                fh.write(orjson.dumps({"fragment": frag}) + b"\n")
                counts["fragments"] += 1
            for edge in store.export_edges():
                fh.write(orjson.dumps({"edge": edge}) + b"\n")
                counts["edges"] += 1
            for mark in store.watermark_rows():
                fh.write(orjson.dumps({"watermark": mark}) + b"\n")
                counts["watermarks"] += 1
            for _, session, project, kind, _, what, fix, vector, when in store.failure_records():
                failure = {"session_id": session, "project": project, "kind": redact(kind),
                           "what": redact(what), "fix": None if fix is None else redact(fix),
                           "embedding": base64.b64encode(vector).decode() if vector else None,
                           "created_at": when}
                fh.write(orjson.dumps({"failure": failure}) + b"\n")
                counts["failures"] += 1
        tmp.replace(out)
    finally:
        store.close()
        tmp.unlink(missing_ok=True)
    return counts


def plan_import(settings: Settings, source: Path, now: float | None = None) -> ImportPlan:
    """What importing `source` would add. Every row is checked first (safety/importcheck.py): a bad
    row is skipped and counted with its reason, the good ones still import."""
    now = time.time() if now is None else now
    plan = ImportPlan()
    with open(source, "rb") as fh:
        _check_header(source, fh.readline())
        store = Store(settings.db_path, readonly=True)
        try:
            for number, line in enumerate(fh, start=2):
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
        if store.has_fragment(frag["id"]):
            plan.skipped_fragments += 1
            return
        frag["metadata"] = orjson.dumps(frag["metadata"]).decode()
        plan.fragments.append(frag)
        plan.lines[id(frag)] = number
    elif "edge" in record:
        edge = importcheck.check_edge(record["edge"], now, plan.problems)
        if store.has_edge(edge["source"], edge["target"], edge["kind"]):
            plan.skipped_edges += 1
        else:
            plan.edges.append(edge)
            plan.lines[id(edge)] = number
    elif "watermark" in record:
        plan.watermarks.append(importcheck.check_watermark(record["watermark"], now,
                                                           plan.problems))
    elif "failure" in record:
        failure = importcheck.check_failure(record["failure"], now, plan.problems)
        for field_name in ("kind", "what", "fix"):  # compared and stored as the database has them
            text = failure[field_name]
            failure[field_name] = None if text is None else redact(text)
        same = (failure["session_id"], failure["kind"], failure["what"], failure["created_at"])
        if same in plan.failure_keys or store.has_failure(*same):
            plan.skipped_failures += 1
        else:
            plan.failure_keys.add(same)
            plan.failures.append(failure)
    else:
        raise importcheck.BadRow("a record that is none of fragment, edge, watermark or "
                                 "failure")


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
    for frag in plan.fragments:
        if frag["superseded_by"] is not None and not known(frag["superseded_by"]):
            frag["superseded_by"] = None
            plan.problems.clamped["superseded_by (unknown fragment, dropped)"] += 1
    plan.lines.clear()


def apply_import(settings: Settings, plan: ImportPlan) -> None:
    from ..capture.patterns import kind_key

    store = Store(settings.db_path)
    try:
        store.import_rows(plan.fragments, plan.edges, plan.watermarks)
        if plan.failures:  # own transaction: they name no fragment, and a rerun skips them
            store.add_failure_records([
                (f["session_id"], f["project"], f["kind"], kind_key(f["kind"]), f["what"],
                 f["fix"], f["embedding"], f["created_at"]) for f in plan.failures])
    finally:
        store.close()


def forget(settings: Settings, fragment_id: str, cascade: bool, now: float) -> list[str]:
    """`lore forget`: what the viewer's forget does (forget_fragments). Returns the deleted
    ids."""
    store = Store(settings.db_path)
    try:
        return forget_fragments(store, settings.db_path, fragment_id, cascade, now)
    finally:
        store.close()


def forget_fragments(store: Store, db_path: Path, fragment_id: str, with_children: bool,
                     now: float, journal: bool = False) -> list[str]:
    """True forgetting, the one way both `lore forget` and the viewer do it. Deletes a
    fragment, and with `with_children` its whole subtree; otherwise its children move up to
    its parent (a topic's children would have nowhere to go, so that is refused). The
    versions it superseded hold much the same text and go too. Consolidation reports that
    quote it lose those items, the curation journal forgets what undo kept of it, and the
    file keeps no copy (zeroed pages, FTS merged, VACUUM, WAL truncated, vector snapshot
    removed). `journal` records the forgetting itself in the curation journal."""
    frag = store.get(store.resolve_id(fragment_id))
    below = store.descendant_ids(frag.id, include_superseded=True)
    if frag.depth == 0 and below and not with_children:
        raise InvalidInput("a topic's concepts would have no parent: forget it with its "
                           "children (lore forget --cascade), or merge it into another topic "
                           "(lore ui)")
    doomed = [frag.id]
    if with_children:
        doomed += [i for i, _ in sorted(below, key=lambda x: -x[1])]  # deepest first
    older = store.older_versions(frag.id)
    while older:
        doomed += older
        older = [o for fid in older for o in store.older_versions(fid) if o not in doomed]
    store.secure_delete()
    summaries = [f.summary for f in store.get_many(doomed, with_parent=False).values()]
    with store.write():
        for victim in doomed[1:] + doomed[:1]:
            if store.has_live_or_dead(victim):
                store.delete(victim, now)
        scrub_reports(store, summaries)
        store.journal_drop_undo(fragment_ids=doomed)
        if journal:
            store.journal_add("forget", frag.id, f"forgot {len(doomed)} fragment(s) "
                              f"[{short_id(frag.id)}]", {}, now)
    store.purge_deleted()
    vector_snapshot.remove(db_path)  # it still holds the forgotten vectors
    return doomed


FORGOTTEN = "[forgotten]"


def scrub_reports(store: Store, summaries: list[str]) -> int:
    """Consolidation reports quote summaries (merges, links, supersessions, what decay
    forgot), quoted as '...' and often clipped: an item quoting a forgotten fragment is
    replaced whole, reason and all. Returns how many reports changed."""
    needles = {f"'{text}'" for s in summaries for text in (s, clip(s, 80))}
    changed = []
    for rid, text in store.consolidation_reports():
        scrubbed, hits = _scrub(orjson.loads(text), needles)
        if hits:
            changed.append((rid, orjson.dumps(scrubbed).decode()))
    if changed:
        store.set_consolidation_reports(changed)
    return len(changed)


def _scrub(value: Any, needles: set[str]) -> tuple[Any, int]:
    if isinstance(value, str):
        flat = " ".join(value.split())  # as clip() flattens whitespace
        hit = any(n in value or n in flat for n in needles)
        return (FORGOTTEN, 1) if hit else (value, 0)
    if isinstance(value, list):
        pairs = [_scrub(v, needles) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        pairs2 = {k: _scrub(v, needles) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs2.items()}, sum(n for _, n in pairs2.values())
    return value, 0
