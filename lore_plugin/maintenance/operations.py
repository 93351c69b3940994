"""Inspection and repair: doctor, export (importing.py reads it back), and forgetting on
request."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
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
from ..store import Store, StoreError
from ..store import journal as store_journal

FORMAT = "lore-export"
VERSION = 1
WAL_WARN_BYTES = 64 * 1024 * 1024
# A store waits for placement for well under a second when a writer runs; one waiting this
# long has no writer placing it (the MCP server that took it is gone, none has started since).
JOURNAL_STALE_S = 300.0

log = logging.getLogger(__name__)


@dataclass
class Finding:
    check: str
    ok: bool
    detail: str
    fixed: bool = False


def doctor(settings: Settings, fix: bool = False, embed: Callable[[Store], int] | None = None,
           place: Callable[[], int] | None = None,
           fill_cues: Callable[[], int] | None = None) -> list[Finding]:
    """Every check reports; with `fix`, each repairable problem is repaired in place.
    `place()` places the store journal's waiting rows and answers how many still wait;
    `fill_cues()` embeds the cues whose vectors are due and answers how many it filled."""
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
        found.append(_graph(store, fix))
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
        found.append(_cue_vectors(store, fix, fill_cues))
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
    found.append(_store_journal(settings, fix, place))
    found.append(_stale_locks(settings, fix))
    return found


def _store_journal(settings: Settings, fix: bool, place: Callable[[], int] | None) -> Finding:
    """store_memory's journal (store/journal.py): stores acknowledged but not yet placed.
    Rows long waiting mean no writer is placing them; `fix` starts one. An unreadable
    journal makes every store_memory answer wait for placement; `fix` moves it aside (kept,
    never deleted: it may hold acknowledged stores) so that a fresh one is made."""
    path = store_journal.journal_path(settings.db_path)
    try:
        waiting, oldest = store_journal.backlog(settings.db_path)
    except StoreError as exc:
        finding = Finding("journal", False, f"unreadable: {exc}")
        if fix:
            aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
            for suffix in ("", "-wal", "-shm"):  # the file and SQLite's own companions
                part = Path(f"{path}{suffix}")
                if part.exists():
                    part.rename(f"{aside}{suffix}")
            finding.fixed = True
            finding.detail += f"; moved aside to {aside.name}"
        return finding
    if not waiting:
        return Finding("journal", True, "no store waiting for placement")
    age = max(0.0, time.time() - oldest) if oldest is not None else 0.0
    detail = f"{waiting} store(s) waiting for placement, the oldest for {age:.0f} s"
    if age < JOURNAL_STALE_S:
        return Finding("journal", True, detail + " (being placed)")
    finding = Finding("journal", False, detail + "; placed when an MCP server or the memory "
                      "service next stores or starts")
    if fix and place is not None:
        left = place()
        finding.fixed = left == 0
        finding.detail += f"; placed {waiting - left}" + (f", {left} still waiting" if left else "")
    return finding


def _cue_vectors(store: Store, fix: bool, fill_cues: Callable[[], int] | None) -> Finding:
    """Notes whose cue vectors wait for the model (recall/cue_vector_fill.py): the memory
    service fills them when idle, so a few are normal for a moment; many that stay mean no
    service has run with the model since they were given cues."""
    due = store.cue_vectors_due_count()
    finding = Finding("cue vectors", due == 0, f"{due} notes' cue vectors wait for the model"
                      + ("" if due == 0 else " (the memory service fills them when idle)"))
    if due and fix and fill_cues is not None:
        done = fill_cues()
        finding.fixed = done >= due
        finding.detail += f"; filled {done}"
    return finding


def _graph(store: Store, fix: bool) -> Finding:
    """Edges and pointers that lead nowhere, second parents, and loops: a hierarchy loop
    (A→B→C→A) or a supersession loop made export, forgetting and the topic counts fail or
    miscount. A second parent goes (the newest edge is the parent, as linking moves a child);
    a loop loses one link, the one that points back up (or, for versions, the newest one's
    pointer, so it is current again)."""
    orphans, dangling, extra = (store.orphan_edges(), store.dangling_supersessions(),
                                store.extra_parents())
    loops, version_loops = store.hierarchy_cycles(), store.supersession_cycles()
    finding = Finding("graph", not (orphans or dangling or extra or loops or version_loops),
                      f"{len(orphans)} orphan edges, {len(dangling)} dangling supersessions, "
                      f"{len(extra)} second parents, {len(loops)} loops in the hierarchy, "
                      f"{len(version_loops)} loops of versions")
    if not finding.ok and fix:
        store.repair_graph([*orphans, *extra], dangling)
        # Loops are looked for again once second parents are gone: some went with them.
        store.repair_graph(store.hierarchy_cycles(), store.supersession_cycles())
        finding.fixed = not (store.extra_parents() or store.hierarchy_cycles()
                             or store.supersession_cycles())
    return finding


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
    """JSON Lines: a header, then one record per fragment, edge, redirect (an id store_memory
    gave out that repeated a fragment), watermark and learning-loop failure (patterns are
    drawn from the failures again by the next consolidation). Vectors are base64 float32, so
    a round trip does not even need the model."""
    store = Store(settings.db_path, readonly=True)
    counts = {"fragments": 0, "edges": 0, "watermarks": 0, "failures": 0, "redirects": 0}
    tmp = temp_sibling(out)
    fd = create_private(tmp)  # before `try`: a name we could not create is not ours to remove
    try:
        with store.read(), open(fd, "wb") as fh:
            fh.write(orjson.dumps({"format": FORMAT, "version": VERSION, "exported_at": time.time()}) + b"\n")
            for frag in store.export_fragments():
                if frag["embedding"] is not None:
                    frag["embedding"] = base64.b64encode(frag["embedding"]).decode()
                frag["metadata"] = _metadata(frag["metadata"])
                # Rows kept before every write was redacted are scrubbed on their way out.
                frag["summary"], frag["content"] = redact(frag["summary"]), redact(frag["content"])
                frag["cues"] = redact(frag["cues"])
                frag["project"] = redact_or_none(frag["project"])
                fh.write(orjson.dumps({"fragment": frag}) + b"\n")
                counts["fragments"] += 1
            for edge in store.export_edges():
                fh.write(orjson.dumps({"edge": edge}) + b"\n")
                counts["edges"] += 1
            for moved in store.export_redirects():  # ids store_memory gave out for repeats
                fh.write(orjson.dumps({"redirect": moved}) + b"\n")
                counts["redirects"] += 1
            for mark in store.watermark_rows():
                fh.write(orjson.dumps({"watermark": mark}) + b"\n")
                counts["watermarks"] += 1
            for _, session, project, kind, _, what, fix, vector, when in store.failure_records():
                failure = {"session_id": redact_or_none(session),
                           "project": redact_or_none(project), "kind": redact(kind),
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


def _metadata(text: str | None) -> Any:
    try:
        return importcheck.redacted(orjson.loads(text or "{}"))
    except orjson.JSONDecodeError:  # a damaged row still exports, without its metadata
        return {}


def redact_or_none(text: str | None) -> str | None:
    return None if text is None else redact(text)


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
    while older:  # each id joins once, so even a loop of versions ends
        doomed += older
        older = list(dict.fromkeys(o for fid in older for o in store.older_versions(fid)
                                   if o not in doomed))
    store.secure_delete()
    summaries = [f.summary for f in store.get_many(doomed, with_parent=False).values()]
    with store.write():
        if with_children:  # nothing in the subtree is moved up into it (a loop would)
            store.cut_hierarchy_within(doomed)
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
    try:  # it held the text of what store_memory stored, until placed
        store_journal.scrub(db_path)
    except StoreError as exc:  # forgotten in the database all the same; say what is left
        log.warning("forget: %s; a copy of the text may remain there", exc)
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
