"""`lore hub init|status|push|pull|dev`: the hub from the command line (issue 28).

Every refusal (no hub configured, a password in the URL, TLS off a remote hub, a wrong URL or
password, no pgvector, a newer schema, an unknown space) reaches the user as one line and a
non-zero exit through main(); the hub is checked before the local file is opened."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace

from ..core.config import Settings
from ..core.errors import ConfigError
from ..core.hubconfig import HubConfigError, checked_url, safe_url
from .maint import _progress

Handler = Callable[[argparse.Namespace, Settings], int]


def _with_url(settings: Settings, url: str | None) -> Settings:
    """The settings with the hub named on the command line, checked as the config's is."""
    if not url:
        if not settings.hub_url:
            raise ConfigError("no hub is configured: pass a URL, set [hub] url in "
                              "config.toml or LORE_HUB_URL (try `lore hub dev` for a local one)")
        return settings
    try:
        fixed, warnings = checked_url(url)
    except HubConfigError as exc:
        raise ConfigError(str(exc)) from None
    for line in warnings:
        print(f"warning: {line}")
    return replace(settings, hub_url=fixed)


def _state_lines(state) -> list[str]:  # noqa: ANN001 - hub_sync.HubState
    lines = [f"hub: {state.url} (schema version {state.version})"]
    lines += [f"  space {name}: {n} fragments" for name, n in state.spaces.items()]
    return lines


def cmd_init(args: argparse.Namespace, settings: Settings) -> int:
    from ..capture.hub_link import conninfo
    from ..maintenance import hub_sync

    configured = settings.hub_url
    settings = _with_url(settings, args.url)
    spaces = tuple(dict.fromkeys([*(args.space or []), *settings.hub_spaces,
                                  settings.hub_space]))
    ran, state = hub_sync.init(settings, conninfo(settings), spaces)
    print(f"{'migrated the schema' if ran else 'the schema was already current'} "
          f"({ran} migration{'s' if ran != 1 else ''} run)")
    print("\n".join(_state_lines(state)))
    if settings.hub_url != configured:
        print(f'to use it, add to ~/.lore/config.toml:\n  [hub]\n  url = "{safe_url(args.url)}"')
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from ..maintenance import hub_sync

    hub_warnings = [w for w in settings.warnings if "hub" in w.lower()]
    for line in hub_warnings:
        print(f"warning: {line}")
    if not settings.hub_url:
        print("no hub configured: all knowledge stays in the local file (space 'local')")
        return 1 if hub_warnings else 0
    print(f"writes go to: {settings.hub_space} (unless a rule below says otherwise)")
    for pattern, space in settings.hub_routes:
        print(f"  rule: {pattern} -> {space}")
    print(f"reads: local, {', '.join(settings.hub_spaces)}")
    from ..store import Store

    if settings.db_path.exists():
        store = Store(settings.db_path, readonly=True)
        try:
            projects = store.projects()
        finally:
            store.close()
        if projects:
            print("where each project writes:")
            for project in projects:
                print(f"  {project} -> {settings.space_for(project)}")
    print("\n".join(_state_lines(hub_sync.hub_state(settings))))
    return 0


def _copy(args: argparse.Namespace, settings: Settings, direction: str) -> int:
    from ..capture.hub_link import open_store
    from ..maintenance import hub_sync
    from ..store import Store

    settings = _with_url(settings, None)
    open_store(settings, args.space).close()  # refuses before the local file is opened
    local = Store(settings.db_path)
    try:
        if direction == "push":
            plan = hub_sync.plan_push(settings, local, args.space)
            print(f"push to space {args.space}: the local file holds {plan.source} fragments "
                  f"and {plan.edges} edges; the space holds {plan.target}; {plan.missing} of "
                  "the local fragments are not in it yet (ids are kept)")
        else:
            plan = hub_sync.plan_pull(settings, local, args.space)
            print(f"pull from space {args.space}: it holds {plan.source} fragments and "
                  f"{plan.edges} edges; the local file holds {plan.target}; {plan.missing} of "
                  "the space's fragments are not in it yet (ids are kept)")
        if not args.yes:
            print(f"nothing copied: run `lore hub {direction} --space {args.space} --yes` to do it")
            return 0
        started = time.monotonic()

        def progress(n: int, total: int) -> None:
            _progress(n, total, direction)

        if direction == "push":  # the model loads only if pushed notes' cues need vectors
            from ..embedding.embedder import LocalEmbedder

            done = hub_sync.push(settings, local, args.space, progress,
                                 LocalEmbedder(settings.home / "models", threads=None))
        else:
            done = hub_sync.pull(settings, local, args.space, progress)
        took = time.monotonic() - started
        print(f"{direction}: {done.fragments} fragments and {done.edges} edges added in "
              f"{took:.1f} s ({plan.source / took if took > 0 else 0:.0f} fragments/s read)")
        if done.cue_vectors:
            print(f"cue vectors for {done.cue_vectors} notes (carried, or embedded here)")
        return 0
    finally:
        local.close()


def cmd_push(args: argparse.Namespace, settings: Settings) -> int:
    return _copy(args, settings, "push")


def cmd_pull(args: argparse.Namespace, settings: Settings) -> int:
    return _copy(args, settings, "pull")


def cmd_dev(args: argparse.Namespace, settings: Settings) -> int:
    from ..hub import dev, init_hub

    folder = dev.dev_folder(settings.home)
    if args.action == "stop":
        print("stopped the dev hub" if dev.stop(folder) else "no dev hub was running")
        return 0
    if args.action == "status":
        print(f"the dev hub {'runs' if dev.running(folder) else 'is stopped'} ({folder})")
        return 0
    server = dev.start(folder)
    init_hub(server.url, (settings.hub_space,))
    print(f"dev hub running (data in {folder}); its URL:\n{server.url}\n"
          f"use it with: export LORE_HUB_URL='{server.url}'\nstop it with: lore hub dev stop")
    return 0


HUB_COMMANDS: dict[str, Handler] = {"init": cmd_init, "status": cmd_status, "push": cmd_push,
                                    "pull": cmd_pull, "dev": cmd_dev}


def cmd_hub(args: argparse.Namespace, settings: Settings) -> int:
    return HUB_COMMANDS[args.hub_command](args, settings)


def add_hub_parsers(sub: argparse._SubParsersAction, commands: dict[str, Handler]) -> None:
    hub = sub.add_parser("hub", help="memory on every machine: a PostgreSQL hub")
    verbs = hub.add_subparsers(dest="hub_command", required=True)
    p = verbs.add_parser("init", help="create or migrate the hub's schema (idempotent)")
    p.add_argument("url", nargs="?", help="postgresql://user@host/db (default: the config's)")
    p.add_argument("--space", action="append", help="also create this space (repeatable)")
    verbs.add_parser("status", help="the hub, its spaces, and where each project writes")
    for verb, what in (("push", "copy local knowledge into a hub space"),
                       ("pull", "copy a hub space into the local file, for work offline")):
        p = verbs.add_parser(verb, help=what)
        p.add_argument("--space", required=True)
        p.add_argument("--yes", action="store_true", help="copy (without it: a preview)")
    p = verbs.add_parser("dev", help="a throwaway local hub under the Lore home")
    p.add_argument("action", nargs="?", choices=("start", "stop", "status"), default="start")
    commands["hub"] = cmd_hub
