"""The viewer's team buttons (issue 29), for the team space of the repository the viewer was
started in, shown only when a hub is configured and that repository opted in:

- **Share**, on a local fragment's page: it moves, with what is below it, into the team space
  (maintenance/share_moves.py, as `lore share ID`).
- **Unshare**, on the activity page, beside each of the member's own facts in the team space:
  it moves back to the local file (as `lore unshare ID`: its author or an owner only, the
  copy first so an interrupted move leaves it in both places, never in neither).
- **Corrections of your facts**, on the activity page: what teammates superseded, both
  authors as the database recorded them (hub/correct_sql.py), with an **Undo** that makes the
  fact live again (any writing member may; the database records who).

Every button is a POST through the fragment actions (web/actions.py): the run's CSRF token,
the Origin, Host and cookie checks of web/security.py, and a redirect after."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from starlette.responses import RedirectResponse, Response

from ..core.errors import InvalidInput, LoreError
from ..core.teamconfig import team_space
from ..core.types import Fragment
from ..recall.render import clip, short_id
from .html import e, post_button, when
from .viewer import Viewer

SHOWN = 20  # rows of each team list on the activity page


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


async def unshare_action(v: Viewer, fid: str) -> Response:
    from ..maintenance.share_moves import unshare

    space = _space(v)
    moved = await v.run(lambda: unshare(v.settings, v.memory.writer, fid, space, None))
    v.flash = (f"Unshared [{short_id(moved.fid)}] from {moved.space} into your own memory "
               f"({moved.fragments} fragment(s)).")
    return RedirectResponse(f"/fragment/{moved.fid}", status_code=303)


async def uncorrect_action(v: Viewer, fid: str, entry: str) -> Response:
    """Undoes the correction `entry` of the team space, which must be of fragment `fid`."""
    space = _space(v)
    if not entry.isdigit() or len(entry) > 18:
        raise InvalidInput("that correction is not one of the team space's")

    def work() -> str:
        from ..capture.hub_link import open_store

        hub = open_store(v.settings, space)
        try:
            if hub.correction(int(entry)).old_id != fid:
                raise InvalidInput("that correction is of another fact; reload the page")
            done = hub.undo_correction(int(entry))
        finally:
            hub.close()
        return (f"Undid {done.corrector}'s correction: “{clip(done.old_summary or fid, 60)}” "
                f"is live again in {space}.")
    v.flash = await v.run(work)
    return RedirectResponse("/activity", status_code=303)


def _space(v: Viewer) -> str:
    space = team_of(v)
    if space is None:
        raise InvalidInput("the viewer was not started in a repository that shares into a "
                           "team space")
    return space


@dataclass
class TeamActivity:
    space: str
    role: str = ""
    corrections: list = field(default_factory=list)  # hub.corrections.Correction
    others: list = field(default_factory=list)  # corrections of teammates' facts
    mine: list[Fragment] = field(default_factory=list)
    problem: str = ""  # the hub not reached, as one line


def team_activity(v: Viewer) -> TeamActivity | None:
    """Runs on the viewer's worker thread: the team part of the activity page, or None when
    the viewer's repository shares into no team space. A hub that cannot be reached costs
    one line on the page, never the page."""
    space = team_of(v)
    if space is None:
        return None
    from ..capture.hub_link import open_store

    found = TeamActivity(space)
    try:
        hub = open_store(v.settings, space)
        try:
            found.role = hub.role()
            found.corrections = hub.corrections(of_author=found.role, by_others=True,
                                                limit=SHOWN)
            # Any member may undo any correction, so the page shows the teammates' too.
            found.others = [c for c in hub.corrections(limit=SHOWN)
                            if c.original_author != found.role]
            found.mine = hub.authored(SHOWN)
        finally:
            hub.close()
    except LoreError as exc:
        found.problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return found


def team_html(t: TeamActivity | None, csrf: str) -> str:
    if t is None:
        return ""
    head = f'<h2 id="team">Team space {e(t.space)}</h2>'
    if t.problem:
        return head + f'<p class="muted">Not reached: {e(t.problem)}</p>'
    rows = [_correction_row(c, "your", csrf) for c in t.corrections]
    corrected = (f'<table id="team-corrections">{"".join(rows)}</table>' if rows else
                 '<p class="muted">No teammate has corrected your facts.</p>')
    theirs = [_correction_row(c, f"{c.original_author}'s", csrf) for c in t.others]
    others = (f'<h3>Corrections of teammates\' facts</h3><table id="team-other-corrections">'
              f'{"".join(theirs)}</table>' if theirs else "")
    mine = "".join(
        f'<li>{e(clip(f.summary, 100))} <span class="muted small">[{e(short_id(f.id))}]</span> '
        + post_button(f"/fragment/{e(f.id)}/unshare", "Unshare", csrf,
                      confirm="Move this and everything below it out of the team space into "
                              "your own memory?")
        + "</li>" for f in t.mine)
    return (head + f'<p class="muted small">You are {e(t.role)}. Any member may undo a '
            f'correction; the database records who did what.</p>'
            f'<h3>Your facts teammates corrected</h3>{corrected}{others}'
            f'<h3>Your knowledge in {e(t.space)}</h3>'
            + (f'<ul id="team-mine">{mine}</ul>' if mine else
               '<p class="muted">You have shared nothing here yet.</p>'))


def _correction_row(c, whose: str, csrf: str) -> str:  # c: hub.corrections.Correction
    """One correction as a table row: when, who replaced whose fact with what, and its Undo
    (or who undid it)."""
    undo = (post_button(f"/fragment/{e(c.old_id)}/uncorrect", "Undo", csrf,
                        {"entry": str(c.id)}) if c.standing
            else f'<span class="muted small">undone by {e(c.undone_by)} '
                 f'{e(when(c.undone_at))}</span>')
    return (f'<tr><td class="small">{e(when(c.at))}</td><td>{e(c.corrector)} replaced '
            f'{e(whose)} “{e(clip(c.old_summary or "(forgotten since)", 80))}” with '
            f'“{e(clip(c.new_summary or "(forgotten since)", 80))}”</td><td>{undo}</td></tr>')
