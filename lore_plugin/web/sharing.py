"""The viewer's share button (issue 29): a local fragment moved, with what is below it, into
the team space of the repository the viewer was started in (maintenance/share_moves.py, as
`lore share ID`). Shown only when a hub is configured and that repository opted in."""

from __future__ import annotations

import os

from starlette.responses import RedirectResponse, Response

from ..core.teamconfig import team_space
from ..core.types import Fragment
from ..recall.render import short_id
from .html import e, post_button
from .viewer import Viewer


def team_of(v: Viewer) -> str | None:
    return team_space(v.settings.hub_url, v.settings.share_overrides, os.getcwd())[0]


def share_form(v: Viewer, f: Fragment) -> str:
    space = team_of(v) if not f.superseded_by else None
    if space is None:
        return ""
    button = post_button(f"/fragment/{e(f.id)}/share", f"Share with {space}", v.secrets.csrf,
                         confirm=f"Move this and everything below it into the team space "
                                 f"{space}? `lore unshare {short_id(f.id)}` brings it back.")
    return (f'<h2>Team</h2><div class="actions">{button} <span class="muted small">moves it, '
            f'keeping its id; its topic and concept are copied</span></div>')


async def share_action(v: Viewer, fid: str) -> Response:
    from ..maintenance.share_moves import share

    moved = await v.run(lambda: share(v.settings, v.memory.writer, fid, team_of(v), None))
    v.flash = (f"Shared [{short_id(moved.fid)}] into {moved.space} ({moved.fragments} "
               f"fragment(s)); `lore unshare {short_id(moved.fid)}` brings it back.")
    return RedirectResponse("/", status_code=303)
