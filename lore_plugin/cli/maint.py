"""`lore ingest`, `doctor`, `export`, `import`, `forget` and `prepare`: the commands a user
needs when something looks wrong, or to move and prune their memory."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..core.config import Settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..recall.memory import Memory

Handler = Callable[[argparse.Namespace, Settings], int]
PLACE_WAIT_S = 120.0  # `doctor --fix`: how long waiting stores may take to be placed


def _progress(done: int, total: int, label: str) -> None:
    if not sys.stderr.isatty() and done not in (0, total):
        return  # a log file gets the start and the end, not a redrawn bar
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:50]:<50}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def transcripts_under(paths: list[Path]) -> list[Path]:
    """Session transcripts (subagent files are ingested with their session)."""
    found: list[Path] = []
    for path in paths:
        if path.is_file() and path.suffix == ".jsonl":
            found.append(path)
        elif path.is_dir():
            found += [p for p in path.rglob("*.jsonl") if "subagents" not in p.parts]
    return sorted(set(found))


def _under(path: Path, roots: list[Path]) -> bool:
    resolved = path.resolve()
    return any(resolved == r or r in resolved.parents for r in (x.resolve() for x in roots))


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    """Backfills the history from before Lore's first run and any unread tails, after an
    estimate of what it sends to the LLM and a yes from the user."""
    from ..capture.history import claude_projects_dir, estimate, record_if_first_run
    from ..core.controls import off_reason
    from ..store import Store
    from ..worker.run import Worker

    roots = args.paths or [claude_projects_dir()]
    record_if_first_run(settings)
    worker = Worker(settings)
    files = [f for f in transcripts_under(roots) if not worker.ignored(f)]
    store = Store(settings.db_path)
    try:
        if args.retry_failed:
            count = store.unpark_all(time.time())
            print(f"retrying {count} failed or parked batch(es)")
        # Parked ranges lie behind the watermark: their transcripts have no unread tail.
        retry = {f["file_path"] for f in store.failures()} if args.retry_failed else set()
        marks = store.watermarks()
        history = [(Path(p), done, end) for p, end, done in store.history()
                   if done < end and _under(Path(p), roots)]
        topics = store.topic_names()
    finally:
        store.close()
    history = [h for h in history if h[0].exists() and not worker.ignored(h[0])]
    todo = [f for f in files if f.stat().st_size > marks.get(str(f), 0) or str(f) in retry]
    print(f"{len(files)} transcripts under {', '.join(map(str, roots))}: "
          f"{len(history)} with history from before Lore's first run, {len(todo)} with an "
          "unread tail" + (" or a parked range" if retry else ""))
    if not history and not todo:
        print("nothing to ingest")
        return 0
    off = off_reason(settings)
    if off:
        print(f"lore: extraction is {off}", file=sys.stderr)
        return 1
    parts = [*history, *((f, marks.get(str(f), 0), None) for f in todo)]
    for line in estimate(settings, parts, topics).lines():
        print(f"  {line}")
    if not args.yes and not _confirm("Send this to the LLM now?"):
        print("nothing was sent: run `lore ingest --yes` to go ahead")
        return 0
    totals = {"batches": 0, "fragments": 0, "supersessions": 0, "failed": 0}
    jobs: list[tuple[Path, int | None]] = [(p, end) for p, _, end in history]
    jobs += [(f, None) for f in todo]
    try:
        for index, (path, end) in enumerate(jobs):
            _progress(index, len(jobs), path.name)
            if end is None:
                result = worker.ingest(path, retry_parked=args.retry_failed, ignore_backoff=True)
            else:
                result = worker.ingest_history(path, end)
            for key in totals:
                totals[key] += result[key]
    finally:
        worker.close()
    _progress(len(jobs), len(jobs), "done")
    print(f"ingested {totals['batches']} batches: {totals['fragments']} fragments, "
          f"{totals['supersessions']} corrections; {totals['failed']} transcript(s) failed"
          + (" (see `lore status`)" if totals["failed"] else ""))
    return 1 if totals["failed"] else 0


def cmd_retry_parked(args: argparse.Namespace, settings: Settings) -> int:
    """Extracts the parked byte ranges again (the watermark moved past them when they were
    parked, so each is read on its own), transcript by transcript."""
    from ..store import HISTORY_KEY, Store
    from ..worker.run import Worker

    store = Store(settings.db_path)
    try:
        parked = store.failures(parked_only=True)
    finally:
        store.close()
    if not parked:
        print("no parked batches")
        return 0
    for row in parked:
        print(f"  {row['file_path']} bytes {row['start_offset']}-{row['end_offset']}: "
              f"{row['last_error'][:100]}")
    worker = Worker(settings)
    totals = {"batches": 0, "fragments": 0, "failed": 0}
    try:
        for key in dict.fromkeys(r["file_path"] for r in parked):
            path = Path(key.removeprefix(HISTORY_KEY))
            if key.startswith(HISTORY_KEY):  # ranges of the history are retried under its key
                store = Store(settings.db_path)
                try:
                    store.unpark(key, time.time())
                    end = max((e for p, e, _ in store.history() if p == str(path)), default=0)
                finally:
                    store.close()
                result = worker.ingest_history(path, end)
            else:
                result = worker.ingest(path, retry_parked=True, ignore_backoff=True)
            for name in totals:
                totals[name] += result[name]
    finally:
        worker.close()
    print(f"retried {len(parked)} parked range(s): {totals['batches']} batches, "
          f"{totals['fragments']} fragments; {totals['failed']} transcript(s) failed again"
          + (" (see `lore status`)" if totals["failed"] else ""))
    return 1 if totals["failed"] else 0


def cmd_undo(args: argparse.Namespace, settings: Settings) -> int:
    """Without an id, the journal of changes (a person's, and every supersession made by
    extraction or consolidation); with one, undoes that change."""
    from datetime import datetime

    from ..maintenance.curation import Curator
    from .opening import open_memory

    memory = open_memory(settings)
    try:
        curator = Curator(memory)
        if args.entry is not None:
            print(curator.undo(args.entry))
            return 0
        entries = curator.history(args.limit)
        if not entries:
            print("no changes in the journal")
        for e in entries:
            when = datetime.fromtimestamp(e.at).strftime("%Y-%m-%d %H:%M")
            state = "undo with `lore undo " + str(e.id) + "`" if e.undoable else e.why_not
            print(f"{e.id:>5}  {when}  {e.label}  ({state})")
        return 0
    finally:
        memory.close()


def cmd_pause(args: argparse.Namespace, settings: Settings) -> int:
    from ..core.controls import pause

    done = pause(str(settings.home))
    print("extraction paused: no transcript is read and no LLM call made until `lore resume`"
          if done else "extraction was paused already; `lore resume` starts it again")
    return 0


def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    from ..core.controls import off_reason, resume

    done = resume(str(settings.home))
    still = off_reason(settings)
    print(("extraction resumed" if done else "extraction was not paused")
          + (f"; but it is still {still}" if still else ""))
    return 0


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from ..maintenance.operations import doctor
    from ..service.pending import place_waiting_stores
    from .opening import fill_cue_vectors, open_memory

    def on_memory(work: Callable[[Memory], int]) -> Callable[..., int]:
        """A repair that opens the memory only when doctor runs it (`embed` gets the store)."""
        def run(*_: object) -> int:
            memory = open_memory(settings)
            try:
                return work(memory)
            finally:
                memory.close()
        return run

    embed = on_memory(lambda memory: memory.backfill_embeddings())
    fill_cues = on_memory(fill_cue_vectors)
    place = on_memory(lambda memory: place_waiting_stores(memory, PLACE_WAIT_S))

    findings = doctor(settings, fix=args.fix, embed=embed, place=place, fill_cues=fill_cues)
    for f in findings:
        mark = "ok " if f.ok else ("fixed" if f.fixed else "FAIL")
        print(f"{mark:5} {f.check:11} {f.detail}")
    broken = [f for f in findings if not f.ok and not f.fixed]
    if broken and not args.fix:
        print("run `lore doctor --fix` to repair what can be repaired")
    return 1 if broken else 0


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    from ..core.errors import InvalidInput

    if (args.file is None) == (args.markdown is None):
        raise InvalidInput("give a FILE for a JSON Lines backup, or --markdown DIR (not both)")
    if args.markdown is not None:
        from ..maintenance.markdown import export_markdown

        files = export_markdown(settings, args.markdown)
        print(f"wrote {files} topic files to {args.markdown} (a read-only view)")
    else:
        from ..maintenance.operations import export

        counts = export(settings, args.file)
        print(f"exported {counts['fragments']} fragments, {counts['edges']} edges, "
              f"{counts['redirects']} redirects and {counts['watermarks']} watermarks to "
              f"{args.file}")
    if (missing := _unplaced(settings)) is not None:
        print(missing)
    return 0


def _unplaced(settings: Settings) -> str | None:
    """A line when store_memory requests are still in the journal: acknowledged, but not yet
    fragments, so an export made now does not hold them (recall/store_journal.py)."""
    from ..store import StoreError
    from ..store.journal import backlog

    try:
        waiting, _ = backlog(settings.db_path)
    except StoreError as exc:
        return f"note: {exc}; stores waiting in it, if any, are not in this export"
    if not waiting:
        return None
    return (f"note: {waiting} store(s) accepted moments ago are still being placed and are not "
            "in this export; export again once `lore status` shows none waiting")


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    from ..maintenance.importing import apply_import, plan_import

    plan = plan_import(settings, args.file)
    print(f"would add {len(plan.fragments)} fragments, {len(plan.edges)} edges, "
          f"{len(plan.redirects)} redirects, {len(plan.watermarks)} watermarks and "
          f"{len(plan.failures)} failure records; {plan.skipped_fragments} fragments, "
          f"{plan.skipped_edges} edges, {plan.skipped_redirects} redirects and "
          f"{plan.skipped_failures} failure records are already here")
    problems = plan.problems.describe()
    if plan.problems.skipped_rows:
        print(f"{plan.problems.skipped_rows} bad row(s) will be skipped; the rest imports:")
    for line in problems:
        print(f"  {line}")
    if not args.yes:
        print("nothing changed: run again with --yes to import")
        return 0
    apply_import(settings, plan)
    print("imported")
    return 0


def cmd_forget(args: argparse.Namespace, settings: Settings) -> int:
    """The local file's fragment; with --space, or when the local file has no such id and this
    folder's repository shares into a team space, that space's (issue 29)."""
    from ..core.errors import NotFound
    from ..maintenance.operations import forget

    space = args.space
    if space is None:
        try:
            gone = forget(settings, args.id, args.cascade, time.time())
        except NotFound:
            space = _team_space_here(settings)
            if space is None:
                raise
        else:
            print(f"forgot {len(gone)} fragment(s)" + (
                "" if args.cascade else "; their children moved up to the parent"))
            return 0
    from ..maintenance.team_forget import forget_in_space

    done = forget_in_space(settings, space, args.id, args.cascade, time.time())
    print(f"forgot {len(done.ids)} fragment(s) of the team space {done.space} (journaled there)"
          + ("" if args.cascade else "; their children moved up to the parent")
          + (f"; {len(done.revived)} teammate's version(s) it had replaced are live again"
             if done.revived else ""))
    return 0


def _team_space_here(settings: Settings) -> str | None:
    import os

    from ..core.teamconfig import team_space

    return team_space(settings.hub_url, settings.share_overrides, os.getcwd())[0]


def cmd_prepare(args: argparse.Namespace, settings: Settings) -> int:
    from ..embedding.embedder import LocalEmbedder

    embedder = LocalEmbedder(settings.home / "models")
    if not embedder.available:
        print(f"lore: no embedding model ({embedder.failure}); keyword search still works",
              file=sys.stderr)
        return 1
    print(f"the embedding model is ready in {settings.home / 'models'}")
    return 0


def add_maint_parsers(sub: argparse._SubParsersAction, commands: dict[str, Handler]) -> None:
    p = sub.add_parser("ingest", help="backfill transcripts (default ~/.claude/projects)")
    p.add_argument("paths", nargs="*", type=Path)
    p.add_argument("--retry-failed", action="store_true", help="retry parked batches too")
    p.add_argument("--yes", action="store_true", help="skip the question after the estimate")
    sub.add_parser("retry-parked", help="extract the parked transcript ranges again")
    p = sub.add_parser("undo", help="list the journal of changes, or undo one by its number")
    p.add_argument("entry", type=int, nargs="?")
    p.add_argument("--limit", type=int, default=30)
    sub.add_parser("pause", help="stop reading transcripts and calling the LLM")
    sub.add_parser("resume", help="undo `lore pause`")
    p = sub.add_parser("doctor", help="check the database and repair with --fix")
    p.add_argument("--fix", action="store_true")
    p = sub.add_parser("export", help="write a JSON Lines backup, or a Markdown mirror")
    p.add_argument("file", type=Path, nargs="?")
    p.add_argument("--markdown", type=Path, metavar="DIR",
                   help="one Markdown file per topic (Obsidian-friendly, read-only view)")
    p = sub.add_parser("import", help="preview, then (--yes) add a backup's missing knowledge")
    p.add_argument("file", type=Path)
    p.add_argument("--yes", action="store_true")
    p = sub.add_parser("forget", help="delete a fragment (children move up unless --cascade)")
    p.add_argument("id")
    p.add_argument("--cascade", action="store_true")
    p.add_argument("--space", help="a team space's fragment (its author or an owner only)")
    sub.add_parser("prepare", help="build the local embedding model now (installing does it)")
    commands.update(ingest=cmd_ingest, pause=cmd_pause, undo=cmd_undo,
                    **{"retry-parked": cmd_retry_parked}, resume=cmd_resume, doctor=cmd_doctor,
                    export=cmd_export, forget=cmd_forget, prepare=cmd_prepare, **{"import": cmd_import})
