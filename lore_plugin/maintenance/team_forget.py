"""`lore forget ID` on a team space's fragment (issue 29): allowed to its author and to the
space's owners, and journaled by the database (hub/forget_sql.py: a trigger writes a `delete`
row, as the deleter, for every fragment deleted from a team space).

Lore asks first (HubStore.may_remove) so that a refusal names the author in one line before
anything changes; the database enforces the same rule anyway, and the whole forgetting is one
transaction: a fragment below that another member wrote (with --cascade) refuses all of it.
The versions a forgotten fragment superseded go with it when this role may remove them, as
`lore forget` does locally; a teammate's version it had replaced is not this member's to
erase: it becomes live again, and the correction record says it was undone (correct_sql.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..capture.hub_link import open_store
from ..core.config import Settings
from ..core.errors import InvalidInput
from ..hub import HubStore
from ..recall.render import short_id


@dataclass(frozen=True)
class Forgotten:
    space: str
    ids: list[str]
    revived: list[str]  # teammates' versions it had superseded, live again


def _doomed(hub: HubStore, fid: str, cascade: bool) -> tuple[list[str], list[str]]:
    below = hub.descendant_ids(fid, include_superseded=True)
    if hub.get(fid).depth == 0 and below and not cascade:
        raise InvalidInput("a topic's concepts would have no parent: forget it with its "
                           "children (lore forget --cascade)")
    doomed = [fid] + ([i for i, _ in sorted(below, key=lambda x: -x[1])] if cascade else [])
    revived: list[str] = []
    older = hub.older_versions(fid)
    while older:  # each id joins once, so even a loop of versions ends
        for old in older:
            (doomed if hub.may_remove(old) else revived).append(old)
        older = list(dict.fromkeys(o for f in older if f in doomed
                                   for o in hub.older_versions(f)
                                   if o not in doomed and o not in revived))
    return doomed, revived


def forget_in_space(settings: Settings, space: str, given: str, cascade: bool,
                    now: float) -> Forgotten:
    hub = open_store(settings, space)
    try:
        fid = hub.resolve_id(given)
        doomed, revived = _doomed(hub, fid, cascade)
        refused = [d for d in doomed if not hub.may_remove(d)]
        if refused:
            author = hub.authors(refused[:1]).get(refused[0], "another member")
            raise InvalidInput(f"only its author ({author}) or an owner of {space} may forget "
                               f"{short_id(refused[0])}; nothing was forgotten")
        with hub.write():  # one transaction: all of it, or (refused by the database) none
            for victim in doomed[1:] + doomed[:1]:
                if hub.has_fragment(victim):
                    hub.delete(victim, now)
        return Forgotten(space, doomed, revived)
    finally:
        hub.close()
