"""The operational `lore` commands: serving, ingestion, consolidation and maintenance.
Each handler imports its module lazily so `lore status` stays quick."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .config import Settings

Handler = Callable[[argparse.Namespace, Settings], int]


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from .server import main as serve

    serve()
    return 0


def cmd_consolidate(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from .consolidate import consolidate
    from .consolidate_run import describe, is_overdue, last_consolidated, run_if_overdue
    from .errors import LoreError
    from .locks import consolidation_lock

    if not settings.db_path.exists():
        print("nothing to consolidate: there is no memory database yet")
        return 0
    if args.dry_run:
        from .store import Store

        store = Store(settings.db_path, readonly=True)
        try:
            preview = consolidate(settings, store, time.time, dry_run=True)
        finally:
            store.close()
        print("\n".join(describe(preview)))
        return 0
    if not args.force and not is_overdue(settings, time.time):
        last = last_consolidated(settings) or time.time()
        due = last + settings.consolidation_interval_secs - time.time()
        print(f"not due: consolidated {(time.time() - last) / 60:.0f} min ago, next in "
              f"{due / 60:.0f} min; `lore consolidate --force` runs it now")
        return 0
    report = run_if_overdue(settings, time.time, force=args.force)
    if report is None:
        if consolidation_lock(settings.lock_dir).is_held_elsewhere():
            raise LoreError("another consolidation is running; try again when it finishes")
        print("not due any more: another process consolidated just now")
        return 0
    print("\n".join(describe(report)))
    return 0


def add_op_parsers(sub: argparse._SubParsersAction, commands: dict[str, Handler]) -> None:
    sub.add_parser("mcp", help="run the MCP server on stdio")
    commands["mcp"] = cmd_mcp
    p = sub.add_parser("consolidate", help="run the sleep cycle: merge, link, decay, forget")
    p.add_argument("--force", action="store_true", help="run now even if not overdue")
    p.add_argument("--dry-run", action="store_true", help="show what would be merged, "
                   "linked, superseded and forgotten; change nothing")
    commands["consolidate"] = cmd_consolidate
