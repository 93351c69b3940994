"""What `lore status` and the SessionStart brief report: the state of the database,
the model, the LLM, ingestion and consolidation, and anything the user must fix."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.config import Settings
from ..core.errors import LoreError
from ..recall.render import clip, plural, short_id

if TYPE_CHECKING:
    from ..store import Store


def _size(path: Path) -> str:
    try:
        size = float(path.stat().st_size)
    except OSError:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return "-"


def problems(settings: Settings, store: Store | None = None) -> list[str]:
    """Short warnings a user should act on; cheap enough for the SessionStart hook, which
    passes the store it has open."""
    from ..llm.client import paused_reason

    found = list(settings.warnings)
    paused = paused_reason(settings)
    if paused:
        found.append(f"extraction is {paused}")
    if store is not None or settings.db_path.exists():
        from ..store import Store as OpenStore

        try:
            reader = store if store is not None else OpenStore(settings.db_path, readonly=True)
            try:
                parked = len(reader.failures(parked_only=True))
                spent = _budget_spent(settings, reader)
            finally:
                if reader is not store:
                    reader.close()
        except Exception as exc:  # status must report, not crash
            found.append(f"database unreadable: {exc}")
        else:
            if parked:
                found.append(f"{parked} transcript batch(es) parked after repeated failures; "
                             "run `lore retry-parked`")
            if spent:
                found.append(spent)
    return found


def _budget_spent(settings: Settings, store: Store) -> str | None:
    from ..llm.usage import budget_spent, day_start

    now = time.time()
    return budget_spent(settings, store.tokens_since(day_start(now)), now)


def _history_lines(store: Store) -> list[str]:
    history = store.history()
    waiting = [h for h in history if h[2] < h[1]]
    if not history:
        return []
    if not waiting:
        return [f"           history from before Lore's first run: {len(history)} transcript(s), "
                "all ingested"]
    return [f"           history from before Lore's first run: {len(waiting)} of "
            f"{len(history)} transcript(s) unread (`lore ingest` estimates the cost, then reads "
            "them)"]


def status_lines(settings: Settings) -> list[str]:
    from ..embedding.embedder import find_model_dir
    from ..embedding.vector_snapshot import snapshot_path
    from ..llm.client import llm_status
    from ..llm.usage import usage_lines
    from ..store import HISTORY_KEY, Store

    db = settings.db_path
    lines = [f"database   {db} ({_size(db)}, WAL {_size(Path(str(db) + '-wal'))})"]
    if db.exists():
        store = Store(db, readonly=True)
        try:
            c = store.counts()
            lines.append(f"schema     version {store.user_version()}")
            lines.append(f"memory     {plural(c['topics'], 'topic')}, "
                         f"{plural(c['fragments'], 'fragment')} ({c['superseded']} superseded), "
                         f"{plural(c['edges'], 'edge')}")
            if c["without_embedding"]:
                lines.append(f"           {c['without_embedding']} fragments await embeddings "
                             "(`lore doctor --fix` fills them)")
            marks = [m for m in store.watermarks() if not m.startswith(HISTORY_KEY)]
            failures = store.failures()
            parked = [f for f in failures if f["parked"]]
            lines.append(f"ingestion  {len(marks)} transcripts tracked, {len(failures)} failing "
                         f"batch(es), {len(parked)} parked")
            lines += _history_lines(store)
            lines += usage_lines(settings, store, time.time())
            for f in parked[:5]:  # the watermark moved past each; `lore retry-parked` retries
                lines.append(f"           parked: {f['file_path']} bytes {f['start_offset']}-"
                             f"{f['end_offset']} ({f['attempts']} attempts): "
                             f"{f['last_error'][:120]}")
            if parked:
                more = f"and {len(parked) - 5} more; " if len(parked) > 5 else ""
                lines.append(f"           {more}`lore retry-parked` tries them again")
            flagged, newest = store.flagged_for_review()
            if flagged:  # a weaker claim against what the user stated: a person decides
                lines.append(f"review     {plural(flagged, 'fact')} flagged, each contradicting "
                             "what you stated: keep one (`lore forget ID` the other, or "
                             "confirm it in `lore ui`)")
                lines += [f"           [{short_id(i)}] {clip(s, 80)} (against [{short_id(c)}])"
                          for i, s, c in newest]
            last = store.last_consolidation()
            if last:
                ago = (time.time() - last["finished_at"]) / 60
                took = last["finished_at"] - last["started_at"]
                counts = ", ".join(f"{k} {v}" for k, v in last["report"].items()
                                   if isinstance(v, int) and v)
                lines.append(f"consolidated {ago:.0f} min ago in {took:.2f}s: {counts or 'no changes'}")
            else:
                lines.append("consolidated never")
        finally:
            store.close()
        from ..store.journal import backlog_line

        lines.append(f"journal    {backlog_line(db, time.time())}")
    else:
        lines.append("memory     empty (no database yet)")
    try:
        model = find_model_dir(settings.home / "models")
        lines.append(f"embeddings {model or 'no local model (keyword search only)'}")
    except LoreError as exc:  # a file failed its SHA-256 check: say so, never a traceback
        model = None
        lines.append(f"embeddings refused: {exc}")
    if model is not None:
        ready = any((settings.home / "models" / "optimized").glob("ort*/model.onnx"))
        lines.append("           " + ("optimised copy ready" if ready else
                                      "no optimised copy yet (`lore prepare` makes it)"))
    snapshot = snapshot_path(db)
    if snapshot is not None and snapshot.exists():
        lines.append(f"vectors    snapshot {snapshot} ({_size(snapshot)})")
    lines.append(f"llm        {llm_status(settings)}")
    lines.append(f"logs       {settings.log_dir}")
    lines += [f"warning    {w}" for w in settings.warnings]
    return lines
