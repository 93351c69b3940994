"""`lore team create|add|remove|list`: who may read and write a team space of the hub
(issue 29), and `lore team corrections|undo`: the corrections members made of each other's
facts, and undoing one, which any writing member may. The database enforces it
(hub/access_sql.py, correct_sql.py); these commands run as the role the configured hub URL
names, so only a space's owners change its members. Every refusal (no hub, unknown space, not
an owner, a role that does not exist, an invalid name) is one line and a non-zero exit
through main()."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..core.config import Settings

Handler = Callable[[argparse.Namespace, Settings], int]


def _team(settings: Settings):  # type: ignore[no-untyped-def]
    from ..capture.hub_link import conninfo
    from ..hub.access import Team

    return Team(conninfo(settings))


def cmd_create(args: argparse.Namespace, settings: Settings) -> int:
    with _team(settings) as team:
        made = team.create(args.name)
        print(f"created team space {args.name}, owned by {team.role}" if made else
              f"space {args.name} already exists and {team.role} is in it")
        print(f"add members with: lore team add ROLE --space {args.name} [--read-only]")
    return 0


def cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    level = "owner" if args.owner else "reader" if args.read_only else "member"
    with _team(settings) as team:
        print(team.add(args.role, args.space, level))
    return 0


def cmd_remove(args: argparse.Namespace, settings: Settings) -> int:
    with _team(settings) as team:
        if not team.remove(args.role, args.space):
            print(f"{args.role} was not a member of {args.space}")
            return 1
        print(f"removed {args.role} from {args.space}: its next query is refused")
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    with _team(settings) as team:
        members = team.members(args.space)
        if not members:
            print(f"role {team.role} is in no space of this hub")
            return 0
        space = None
        for m in members:
            if m.space != space:
                space = m.space
                print(f"space {space}:")
            print(f"  {m.role:<24} {m.level:<7} (added by {m.added_by})")
    return 0


def cmd_corrections(args: argparse.Namespace, settings: Settings) -> int:
    from ..capture.hub_link import open_store
    from ..recall.render import clip, when

    hub = open_store(settings, args.space)
    try:
        found = hub.corrections(limit=args.limit)
    finally:
        hub.close()
    if not found:
        print(f"no corrections in {args.space}")
    for c in found:
        state = "standing" if c.standing else f"undone by {c.undone_by}"
        print(f"#{c.id} {when(c.at)} {c.corrector} corrected {c.original_author}'s "
              f"[{c.old_id[:8]}] \u201c{clip(c.old_summary or '(forgotten since)', 60)}\u201d"
              f" -> [{c.new_id[:8]}] \u201c{clip(c.new_summary or '(forgotten since)', 60)}"
              f"\u201d ({state})")
    if any(c.standing for c in found):
        print(f"undo one with: lore team undo N --space {args.space}")
    return 0


def cmd_undo(args: argparse.Namespace, settings: Settings) -> int:
    from ..capture.hub_link import open_store

    hub = open_store(settings, args.space)
    try:
        done = hub.undo_correction(args.entry)
    finally:
        hub.close()
    print(f"undid {done.corrector}'s correction #{done.id}: [{done.old_id[:8]}] is live again "
          f"in {args.space}; the correcting fact stays (forget it if it is wrong)")
    return 0


TEAM_COMMANDS: dict[str, Handler] = {"create": cmd_create, "add": cmd_add,
                                     "remove": cmd_remove, "list": cmd_list,
                                     "corrections": cmd_corrections, "undo": cmd_undo}


def cmd_team(args: argparse.Namespace, settings: Settings) -> int:
    return TEAM_COMMANDS[args.team_command](args, settings)


def add_team_parsers(sub: argparse._SubParsersAction, commands: dict[str, Handler]) -> None:
    team = sub.add_parser("team", help="team spaces of the hub: who may read and write them")
    verbs = team.add_subparsers(dest="team_command", required=True)
    p = verbs.add_parser("create", help="create a team space; you become its owner")
    p.add_argument("name")
    p = verbs.add_parser("add", help="add a PostgreSQL role to a space (owners only)")
    p.add_argument("role")
    p.add_argument("--space", required=True)
    level = p.add_mutually_exclusive_group()
    level.add_argument("--read-only", action="store_true", help="may read, never write")
    level.add_argument("--owner", action="store_true", help="may also change the members")
    p = verbs.add_parser("remove", help="remove a role from a space; takes effect at once")
    p.add_argument("role")
    p.add_argument("--space", required=True)
    p = verbs.add_parser("list", help="the members of the spaces you can see")
    p.add_argument("--space")
    p = verbs.add_parser("corrections", help="who corrected whose facts in a space, newest first")
    p.add_argument("--space", required=True)
    p.add_argument("--limit", type=int, default=20)
    p = verbs.add_parser("undo", help="undo correction N (from `lore team corrections`): the "
                                      "corrected fact is live again; any writing member may")
    p.add_argument("entry", type=int)
    p.add_argument("--space", required=True)
    commands["team"] = cmd_team
