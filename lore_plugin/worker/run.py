"""The detached process that does the slow work: ingestion under a per-transcript lock,
the SessionStart sweep, and consolidation. Started by hooks/dispatch.py; also used by the CLI.

    python -m lore_plugin.worker ingest PATH [--session ID]
    python -m lore_plugin.worker sweep [--projects DIR]
    python -m lore_plugin.worker spaces-brief [CWD]
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..capture.history import claude_projects_dir, record_if_first_run
from ..core.config import Settings, load_settings
from ..core.controls import off_reason, project_ignored, transcript_cwd
from ..core.errors import LLMUnavailable, LoreError
from ..core.faults import crash_point  # test-only, free when unset
from ..core.locks import transcript_lock
from ..core.private import lock_down
from ..safety.logs import setup_logging

log = logging.getLogger("lore.worker")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


class Worker:
    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self._ingestor = None

    def ingestor(self):  # noqa: ANN201 - built lazily: heavy imports only when there is work
        if self._ingestor is None:
            from ..llm.client import pick_llm

            llm = pick_llm(self.settings)  # first: without an LLM, stop before the heavy imports
            from ..capture.ingest import Ingestor
            from ..embedding.embedder import LocalEmbedder

            embedder = LocalEmbedder(self.settings.home / "models", threads=None)
            self._ingestor = Ingestor(self.settings, llm, embedder, self.clock)
        return self._ingestor

    def close(self) -> None:
        if self._ingestor is not None:
            self._ingestor.close()

    def reconfigure(self, settings: Settings) -> None:
        """New settings for the next job: the ingestor's LLM and budget are built anew."""
        self.close()
        self.settings, self._ingestor = settings, None

    def ignored(self, path: Path, cwd: str | None = None) -> bool:
        """Whether the transcript's project is opted out; decided before reading any of it
        but the `cwd` field of its head, and only when no hook told the cwd."""
        return project_ignored(self.settings, cwd or transcript_cwd(path))

    def ingest(self, path: Path, session_id: str | None = None, retry_parked: bool = False,
               ignore_backoff: bool = False, cwd: str | None = None) -> dict[str, int]:
        """Ingests one session transcript and its subagents' transcripts. If another worker
        holds the lock, the work is left to it: the holder re-reads the file before it lets go."""
        from ..capture.transcript import subagent_paths

        totals = {"batches": 0, "fragments": 0, "supersessions": 0, "failed": 0}
        if off_reason(self.settings) or self.ignored(path, cwd):
            return totals
        lock = transcript_lock(self.settings.lock_dir, str(path))
        while True:
            if not lock.try_acquire():
                log.info("%s is being ingested by another worker", path)
                return totals
            size_at_start = _size(path)
            try:
                for file in [path, *subagent_paths(path)]:
                    report = self.ingestor().ingest(file, session_id, retry_parked, ignore_backoff)
                    totals["batches"] += report.batches
                    totals["fragments"] += report.fragments
                    totals["supersessions"] += report.supersessions
                    totals["failed"] += report.failed is not None
            finally:
                lock.release()
            if totals["fragments"]:
                self.fill_cue_vectors()
            # Lines appended while we held the lock may belong to a worker that gave up on
            # seeing it: go round again so no delta is stranded.
            if _size(path) <= size_at_start or totals["failed"]:
                return totals

    def fill_cue_vectors(self) -> None:
        """The cue vectors of notes the batches just committed with cues (the triggers made
        them due; recall/cue_vector_fill.py), outside the transcript's lock. Best effort:
        what is left due, the memory service fills."""
        embedder = getattr(self._ingestor, "embedder", None)
        if embedder is None or not embedder.available:
            return
        from ..recall.cue_vector_upkeep import fill_after_write
        from ..store import Store

        try:
            store = Store(self.settings.db_path)
        except Exception as exc:  # noqa: BLE001 - left due for the service
            log.warning("could not fill cue vectors after ingestion: %s", exc)
            return
        try:
            fill_after_write(store, embedder, "the local memory")
        finally:
            store.close()

    def ingest_history(self, path: Path, end: int) -> dict[str, int]:
        """Backfills one transcript's history from before Lore's first run (`lore ingest`),
        under a lock of its own: the live tail may be ingested meanwhile."""
        from ..store import HISTORY_KEY

        totals = {"batches": 0, "fragments": 0, "supersessions": 0, "failed": 0}
        lock = transcript_lock(self.settings.lock_dir, HISTORY_KEY + str(path))
        if not lock.try_acquire():
            log.info("the history of %s is being ingested by another process", path)
            return totals
        try:
            report = self.ingestor().ingest(path, ignore_backoff=True, history_end=end)
        finally:
            lock.release()
        totals.update(batches=report.batches, fragments=report.fragments,
                      supersessions=report.supersessions, failed=int(report.failed is not None))
        return totals

    def pending(self, projects: Path) -> Iterable[Path]:
        """Session transcripts with an unread tail older than stale_tail_secs (a crashed or
        still-open session), plus failed batches whose back-off has passed."""
        from ..store import Store

        store = Store(self.settings.db_path, readonly=True)
        try:
            marks = store.watermarks()
            due = {f["file_path"] for f in store.failures()
                   if not f["parked"] and f["next_retry"] <= self.clock()}
        finally:
            store.close()
        now = time.time()
        for path in sorted(projects.glob("*/*.jsonl")):
            try:
                stat = path.stat()
            except OSError:
                continue
            unread = stat.st_size > marks.get(str(path), 0)
            if str(path) in due or (unread and now - stat.st_mtime >= self.settings.stale_tail_secs):
                yield path

    def adopt_remote_keys(self) -> None:
        """Path-keyed rows of repositories now known by their remote move to that key."""
        if not self.settings.db_path.exists():
            return
        from ..capture.project_keys import adopt_remote_keys
        from ..store import Store

        store = Store(self.settings.db_path)
        try:
            adopt_remote_keys(store)
        except LoreError as exc:  # busy: the next session start tries again
            log.warning("sweep: project keys not moved: %s", exc)
        finally:
            store.close()

    def sweep(self, projects: Path) -> dict[str, int]:
        totals = {"transcripts": 0, "fragments": 0}
        record_if_first_run(self.settings, projects)  # no hook recorded it: nothing is read
        self.adopt_remote_keys()
        try:
            for path in ([] if off_reason(self.settings) else self.pending(projects)):
                if self.ignored(path):
                    continue
                result = self.ingest(path)
                totals["transcripts"] += 1
                totals["fragments"] += result["fragments"]
        except LLMUnavailable as exc:  # consolidation's other phases need no LLM: go on
            log.warning("sweep: %s; unread transcripts wait, nothing is lost", exc)
        self.close()  # consolidation opens its own; the ingestor's index would sit idle
        from ..consolidation.schedule import run_if_overdue

        run_if_overdue(self.settings, self.clock)
        if self.settings.hub_url:  # each hub space once across machines (hub_spaces.py)
            from ..consolidation.hub_spaces import run_hub_if_overdue

            run_hub_if_overdue(self.settings, self.clock)
        return totals


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lore-worker", exit_on_error=False)
    sub = parser.add_subparsers(dest="job", required=True)
    p = sub.add_parser("ingest")
    p.add_argument("path", type=Path)
    p.add_argument("--session")
    p.add_argument("--cwd", help="the session's project folder, from the hook's payload")
    p = sub.add_parser("sweep")
    p.add_argument("--projects", type=Path, default=None)
    sub.add_parser("consolidate")
    p = sub.add_parser("spaces-brief", help="read the hub part of a folder's brief (issue 28)")
    p.add_argument("cwd", nargs="?", default=None, help="the session's project folder")
    p = sub.add_parser("drain", help="run queued jobs (capture/jobs.py) in a worker slot")
    p.add_argument("--slot-fd", type=int, default=None, help="the inherited slot lock")
    return parser


def run_job(worker: Worker, settings: Settings, args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        if args.job == "ingest":
            # A Stop hook may be Lore's first run: the history is recorded before any read,
            # all but the session the hook fired for.
            record_if_first_run(settings, live=args.path)
            result = worker.ingest(args.path, args.session, cwd=args.cwd)
        elif args.job == "sweep":
            result = worker.sweep(args.projects or claude_projects_dir())
        elif args.job == "spaces-brief":  # a brief found no memory service: read for the next
            from ..service.spaces_brief import refresh

            result = refresh(settings, args.cwd) if settings.hub_url else {"parts": 0}
        else:
            from ..consolidation.schedule import run_if_overdue

            result = {"ran": int(run_if_overdue(settings, time.time, force=True) is not None)}
        log.info("%s done in %.2fs: %s", args.job, time.monotonic() - started, result)
    except LLMUnavailable as exc:
        log.warning("%s: %s; the watermarks keep the place, nothing is lost", args.job, exc)
    except LoreError as exc:
        log.error("%s failed: %s", args.job, exc)
        return 1
    except Exception:
        log.exception("%s crashed", args.job)
        return 1
    return 0


def drain(worker: Worker, settings: Settings, slot: int | None) -> int:
    """Runs queued jobs while holding a worker slot (inherited from the hook, or taken here),
    then lets it go and looks once more: see capture/jobs.py for why no job is left behind."""
    from ..capture import jobs

    home, lock_dir = str(settings.home), str(settings.lock_dir)
    if slot is None:
        slot = jobs.try_slot(lock_dir, settings.max_workers)
    parser, ran, failed = _parser(), 0, 0
    while slot is not None:
        jobs.requeue_abandoned(home)
        while (job := jobs.take(home)) is not None:
            claimed, job_args = job
            try:
                args = parser.parse_args(job_args)
                fresh = load_settings()  # the user may have edited the config meanwhile
                if fresh != settings:
                    worker.reconfigure(fresh)
                    settings = fresh
                if args.job != "drain":
                    failed += run_job(worker, settings, args)
                    ran += 1
                    crash_point("after-job")  # done, but its claim not yet cleared
            except (argparse.ArgumentError, SystemExit):
                log.error("dropped a malformed queued job: %r", job_args)
            finally:
                jobs.finish(claimed)
        os.close(slot)
        slot = jobs.try_slot(lock_dir, settings.max_workers) if jobs.waiting(home) else None
    log.info("drain done: %d job(s), %d failed", ran, failed)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    settings = load_settings()
    lock_down(settings.home, settings.db_path)
    setup_logging(settings.log_dir, "worker")
    args = _parser().parse_args(argv)
    worker = Worker(settings)
    try:
        if args.job == "drain":
            return drain(worker, settings, args.slot_fd)
        return run_job(worker, settings, args)
    finally:
        worker.close()

