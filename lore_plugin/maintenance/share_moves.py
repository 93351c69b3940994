"""`lore share ID` and `lore unshare ID` (issue 29): a fragment, with everything below it,
moved by hand between the local file and a team space, keeping its id.

The fragments move; the topic and concept above them are copied (same ids), so the moved
knowledge keeps its place in both hierarchies. The copy is written before anything is deleted,
and a copy the other side already holds is left as it is: a move cut off midway leaves the
knowledge in both places, never in neither, and running the command again finishes it. Each
move is journaled on both sides (the activity page shows it); its inverse undoes it.

A manual share keeps the one automatic rule that is about safety rather than relevance:
text that redaction touched is never shared (capture/sharing.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..capture.hub_link import open_store
from ..capture.project_keys import adopt_remote_keys
from ..capture.sharing import redaction_touched
from ..core.config import Settings
from ..core.errors import InvalidInput, LoreError, NotFound
from ..core.faults import crash_point
from ..core.teamconfig import team_space
from ..recall.render import clip
from ..store import Store
from .cue_vector_carry import carry_quietly, lacking_locally


@dataclass(frozen=True)
class Moved:
    fid: str
    space: str
    fragments: int  # moved (the fragment and those below it)
    copied: int  # ancestors copied to keep the moved ones in place


def space_for(settings: Settings, space: str | None, cwd: str | None) -> str:
    if not settings.hub_url:
        raise InvalidInput("no hub is configured: set [hub] url in config.toml or LORE_HUB_URL")
    if space:
        return space
    found, _ = team_space(settings.hub_url, settings.share_overrides, cwd)
    if found is None:
        raise InvalidInput("this folder's repository shares into no team space (no .lore.toml "
                           "with `space = \"...\"`); name one with --space")
    return found


def _rows(export: Iterable[dict[str, Any]], ids: set[str]) -> list[dict[str, Any]]:
    return [row for row in export if row["id"] in ids]


def _edges(export: Iterable[dict[str, Any]], ids: set[str]) -> list[dict[str, Any]]:
    return [e for e in export if e["source"] in ids and e["target"] in ids]


def _is_local(local: Store, given: str) -> bool:
    try:
        local.resolve_id(given)
    except LoreError:  # not there, or not an id at all
        return False
    return True


def _ancestors(parent_of: Callable[[str], str | None], fid: str) -> list[str]:
    chain: list[str] = []
    parent = parent_of(fid)
    while parent is not None and parent not in chain and len(chain) < 16:
        chain.append(parent)
        parent = parent_of(parent)
    return chain


def share(settings: Settings, local: Store, given: str, space: str | None, cwd: str | None,
          clock: Callable[[], float] = time.time) -> Moved:
    """Moves a local fragment and those below it into the team space."""
    space = space_for(settings, space, cwd)
    fid = local.resolve_id(given)
    moving = [fid, *(d for d, _ in local.descendant_ids(fid, include_superseded=True))]
    frags = local.get_many(moving)
    touched = [f for f in frags.values() if redaction_touched(f.summary, f.content, f.cues)]
    if touched:
        raise InvalidInput(f"“{clip(touched[0].summary, 60)}” holds text redaction replaced; "
                           "it stays local")
    adopt_remote_keys(local)  # the team space holds the key every machine computes
    above = _ancestors(local.parent_id, fid)
    ids = set(moving) | set(above)
    rows = _rows(local.export_fragments(), ids)
    order = {i: n for n, i in enumerate([*reversed(above), *moving])}
    rows.sort(key=lambda r: order[r["id"]])
    hub = open_store(settings, space)
    try:
        hub.insert_rows(rows, _edges(local.export_edges(), ids))
        if not hub.has_fragment(fid):
            raise NotFound(f"the team space {space} did not keep {fid[:8]}; nothing was moved")
        carry_quietly(local, hub, rows, hub.cue_vectors_due_among)  # what the file embedded
        now = clock()
        label = f"shared “{clip(frags[fid].summary, 50)}” into {space} (undo: lore unshare {fid[:8]})"
        hub.journal_add("share", fid, label, {}, now)
    finally:
        hub.close()
    with local.write():
        for d in reversed(moving):  # the deepest first: nothing is re-parented on the way
            local.delete(d, now)
        local.journal_add("share", fid, label, {}, now)
    return Moved(fid, space, len(moving), len(above))


def unshare(settings: Settings, local: Store, given: str, space: str | None, cwd: str | None,
            clock: Callable[[], float] = time.time) -> Moved:
    """Moves a team fragment and those below it into the local file: only its author or an
    owner of the space may (HubStore.may_remove); anyone else is refused before anything
    is copied."""
    space = space_for(settings, space, cwd)
    hub = open_store(settings, space)
    try:
        try:
            fid = hub.resolve_id(given)
        except NotFound:
            if _is_local(local, given):  # a move that ended before its last step, or done
                raise InvalidInput(f"{given[:12]} is not in {space}: it is in your own memory "
                                   "already") from None
            raise
        if not hub.may_remove(fid):
            author = hub.authors([fid]).get(fid, "another member")
            raise InvalidInput(f"only its author ({author}) or an owner of {space} may take "
                               f"{fid[:8]} out of the team space")
        moving = [fid, *(d for d, _ in hub.descendant_ids(fid, include_superseded=True))]
        above = _ancestors(hub.parent_id, fid)
        ids = set(moving) | set(above)
        rows = _rows(hub.export_fragments(), ids)
        # The copy first, in one local transaction (INSERT OR IGNORE: a second run adds
        # nothing), then the team's rows go in one hub transaction: killed between the two,
        # the knowledge is in both places and running the command again finishes the move.
        local.import_rows(rows, _edges(hub.export_edges(), ids), [])
        carry_quietly(hub, local, rows, lacking_locally(local))
        crash_point("unshare-after-copy")
        summary = next((r["summary"] for r in rows if r["id"] == fid), fid)
        now = clock()
        label = f"unshared “{clip(summary, 50)}” from {space} (undo: lore share {fid[:8]})"
        with hub.write():
            for d in reversed(moving):
                hub.delete(d, now)
            hub.journal_add("unshare", fid, label, {}, now)
        crash_point("unshare-after-delete")
        if hub.has_fragment(fid):  # row-level security filters a delete rather than refuse it
            raise InvalidInput(f"the team space {space} kept {fid[:8]}; it is now also local")
    finally:
        hub.close()
    local.journal_add("unshare", fid, label, {}, now)
    return Moved(fid, space, len(moving), len(above))
