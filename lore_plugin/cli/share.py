"""`lore share ID` and `lore unshare ID` (issue 29): move a fragment, and what is below it,
between the local file and the team space of this folder's repository (or --space), keeping
its id (maintenance/share_moves.py). Refusals are one line and a non-zero exit through main()."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from ..core.config import Settings

Handler = Callable[[argparse.Namespace, Settings], int]


def cmd_share(args: argparse.Namespace, settings: Settings) -> int:
    from ..maintenance.share_moves import share, unshare
    from ..store import Store

    store = Store(settings.db_path)
    try:
        move = share if args.command == "share" else unshare
        done = move(settings, store, args.id, args.space, os.getcwd())
    finally:
        store.close()
    where = f"into {done.space}" if args.command == "share" else f"from {done.space} to local"
    print(f"{args.command}d {done.fid[:8]} {where}: {done.fragments} fragment(s) moved"
          + (f", {done.copied} above it copied" if done.copied else ""))
    return 0


def add_share_parsers(sub: argparse._SubParsersAction, commands: dict[str, Handler]) -> None:
    for verb, what in (("share", "move a local fragment into the repository's team space"),
                       ("unshare", "move a team fragment back into the local file")):
        p = sub.add_parser(verb, help=what)
        p.add_argument("id", help="fragment id (8+ characters)")
        p.add_argument("--space", help="the team space (default: this repository's .lore.toml)")
        commands[verb] = cmd_share
