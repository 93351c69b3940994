"""The operational `lore` commands: serving, ingestion, consolidation and maintenance.
Each handler imports its module lazily so `lore status` stays quick."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..core.config import Settings

Handler = Callable[[argparse.Namespace, Settings], int]
BACKGROUND_IDLE_MINUTES = 120  # a viewer /lore:memory started stops when unused this long


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from ..server.front import main as serve

    serve()
    return 0


def cmd_consolidate(args: argparse.Namespace, settings: Settings) -> int:
    """The local file's cycle, then each hub space this Lore uses and may write."""
    code = _consolidate_local(args, settings)
    if settings.hub_url and args.dry_run:
        import time

        from ..consolidation.hub_spaces import describe_previews, preview_hub_spaces

        print("\n".join(describe_previews(preview_hub_spaces(settings, time.time))))
    elif settings.hub_url:
        import time

        from ..consolidation.hub_spaces import describe_outcomes, run_hub_if_overdue

        print("\n".join(describe_outcomes(run_hub_if_overdue(settings, time.time,
                                                              force=args.force))))
    return code


def _consolidate_local(args: argparse.Namespace, settings: Settings) -> int:
    import time

    from ..consolidation.cycle import consolidate
    from ..consolidation.schedule import describe, is_overdue, last_consolidated, run_if_overdue
    from ..core.errors import LoreError
    from ..core.locks import consolidation_lock

    if not settings.db_path.exists():
        print("nothing to consolidate: there is no memory database yet")
        return 0
    if args.dry_run:
        from ..store import Store

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


def cmd_ui(args: argparse.Namespace, settings: Settings) -> int:
    """Serves the viewer in the foreground, or with --url prints a link to the running viewer,
    starting one in the background first if none runs (what /lore:memory does). Every link
    carries a one-time code: the browser's command line, the terminal and the transcript keep
    only a spent one."""
    from ..web.app import login_link, published

    running = published(settings.home)
    if args.url:
        print(login_link(running or _start_in_background(settings)))
        return 0
    if running:
        link = login_link(running)
        print(f"a viewer is already running: {link}")
        if not args.no_browser:
            import webbrowser

            webbrowser.open(link)
        return 0
    from ..embedding.embedder import LocalEmbedder
    from ..web.app import serve
    from ..web.served import ServedMemory

    def ready(link: str) -> None:
        if args.background:  # stdout is ui.out, which outlives the run: no code goes there
            print(f"Lore's viewer listens on {link.split('?', 1)[0]}", flush=True)
            return
        print(f"Lore's viewer: {link}\n(only this machine can reach it; the link works once; "
              f"Ctrl-C stops it)", flush=True)
        if not args.no_browser:
            import webbrowser

            webbrowser.open(link)

    # Its searches go to the memory service when one runs or can be started (web/served.py):
    # the viewer then loads no model or index of its own for them.
    memory = ServedMemory(settings.db_path, LocalEmbedder(settings.home / "models"),
                          str(settings.home))
    serve(settings, memory, port=args.port, on_ready=ready, idle_minutes=args.idle_minutes)
    return 0


def _start_in_background(settings: Settings) -> dict:
    import subprocess
    import sys
    import time

    from ..core.errors import LoreError
    from ..core.private import private_dir
    from ..web.app import published

    # Written afresh each time: what an older viewer left in it (older versions printed their
    # token there) goes, and the new one prints its address only.
    log = private_dir(settings.log_dir) / "ui.out"
    with open(log, "wb") as out:
        # A new session, stdio away from the caller's pipes: Claude Code waits for those to
        # close, and the viewer outlives the command that started it.
        subprocess.Popen([sys.executable, "-m", "lore_plugin.cli", "ui", "--background",
                          "--idle-minutes", str(BACKGROUND_IDLE_MINUTES)],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                         start_new_session=True, close_fds=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running = published(settings.home)
        if running:
            return running
        time.sleep(0.1)
    raise LoreError(f"the viewer did not start; see {log}")


def add_op_parsers(sub: argparse._SubParsersAction, commands: dict[str, Handler]) -> None:
    sub.add_parser("mcp", help="run the MCP server on stdio")
    commands["mcp"] = cmd_mcp
    p = sub.add_parser("consolidate", help="run the sleep cycle: merge, link, decay, forget")
    p.add_argument("--force", action="store_true", help="run now even if not overdue")
    p.add_argument("--dry-run", action="store_true", help="show what would be merged, "
                   "linked, superseded and forgotten; change nothing")
    commands["consolidate"] = cmd_consolidate
    p = sub.add_parser("ui", help="browse, search and curate memory in a local web viewer")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-browser", action="store_true", help="print the URL, open no browser")
    p.add_argument("--url", action="store_true",
                   help="print the running viewer's URL, starting one in the background if needed")
    p.add_argument("--idle-minutes", type=float, default=0,
                   help="stop after this long without a request (0: never; a viewer --url "
                        f"starts stops after {BACKGROUND_IDLE_MINUTES} minutes)")
    # How --url starts one: no browser, and no login code in its output (that is ui.out).
    p.add_argument("--background", action="store_true", help=argparse.SUPPRESS)
    commands["ui"] = cmd_ui
