"""The activity page: what happened lately and what needs a hand. Ingested sessions with the
fragments each added, parked batches (with a retry button), LLM use, the last consolidation
report, the problems `lore doctor` finds, the curation journal with its undo buttons, and in a
repository that shares into a team space, that space's part (web/sharing.py)."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ..recall.render import clip
from .html import e, frag_link, frag_tags, page, post_button, when
from .viewer import Viewer, viewer_of

SESSIONS = 10
PER_SESSION = 8
USAGE_NOTE = "Every LLM call Lore made, from its ledger (as `lore status` shows it), and the backend:"


def gather(v: Viewer) -> dict[str, Any]:
    """Runs on the viewer's worker thread: every read the page needs."""
    from ..consolidation.schedule import describe
    from ..llm.client import llm_status
    from ..llm.usage import usage_lines
    from ..maintenance.status import problems

    store = v.memory.reader
    sessions = []
    for sid, count, latest in store.recent_sessions(SESSIONS):
        ids = store.session_fragment_ids(sid, PER_SESSION)
        frags = store.get_many(ids, with_parent=False)
        sessions.append((sid, count, latest, [frags[i] for i in ids if i in frags]))
    last = store.last_consolidation()
    try:
        report = describe(last["report"]) if last else []
    except (KeyError, TypeError, ValueError):  # a report from an older or newer Lore
        report = [json.dumps(last["report"], indent=1)[:4000]] if last else []
    return {
        "sessions": sessions,
        "parked": store.failures(parked_only=True),
        "llm": "\n".join([*usage_lines(v.settings, store, time.time()),
                           f"backend    {llm_status(v.settings)}"]),
        "consolidation": (last, report),
        "problems": problems(v.settings, store),
        "journal": v.curator.history(50),
    }


def _sessions(rows: list) -> str:
    if not rows:
        return '<p class="muted">No session has been ingested yet.</p>'
    out = []
    for sid, count, last, frags in rows:
        items = "".join(f"<li>{frag_link(f)}{frag_tags(f)}</li>" for f in frags)
        more = f'<li class="muted">… {count - len(frags)} more</li>' if count > len(frags) else ""
        out.append(f'<details><summary><code>{e(sid)}</code> <span class="tag">{count} '
                   f'fragments</span> <span class="muted small">last {e(when(last))}</span>'
                   f'</summary><ul>{items}{more}</ul></details>')
    return "".join(out)


def _parked(rows: list[dict[str, Any]], csrf: str) -> str:
    if not rows:
        return '<p class="muted">No parked batches.</p>'
    body = "".join(
        f"<tr><td><code>{e(r['file_path'])}</code><br><span class=\"muted small\">bytes "
        f"{r['start_offset']}–{r['end_offset']}, {r['attempts']} attempts</span></td>"
        f"<td class=\"small\">{e(clip(r['last_error'], 200))}</td><td>"
        + post_button("/retry", "Retry", csrf, {"file_path": r["file_path"],
                                                "start": str(r["start_offset"])})
        + "</td></tr>" for r in rows)
    return f'<table id="parked"><tr><th>transcript</th><th>last error</th><th></th></tr>{body}</table>'


def _journal(entries: list, csrf: str) -> str:
    if not entries:
        return '<p class="muted">No changes made in the viewer yet.</p>'
    rows = []
    for x in entries:
        undo = (post_button(f"/undo/{x.id}", "Undo", csrf) if x.undoable
                else f'<span class="muted small">{e(x.why_not)}</span>')
        rows.append(f"<tr><td class=\"small\">{e(when(x.at))}</td><td>{e(x.action)}</td>"
                    f"<td><a href=\"/fragment/{e(x.fragment_id)}\">{e(x.label)}</a></td>"
                    f"<td>{undo}</td></tr>")
    return f'<table id="journal">{"".join(rows)}</table>'


async def activity_page(request: Request) -> Response:
    from .sharing import team_activity, team_html  # issue 29: the repository's team space

    v = viewer_of(request)
    d = await v.run(lambda: gather(v))
    team = await v.run(lambda: team_activity(v))
    last, lines = d["consolidation"]
    consolidation = ('<p class="muted">Memory has never been consolidated.</p>' if last is None
                     else f'<p>Finished {e(when(last["finished_at"]))}.</p><pre>'
                          f'{e(chr(10).join(lines) or "no details recorded")}</pre>')
    problems = "".join(f"<li>{e(p)}</li>" for p in d["problems"])
    body = (f'<h2>Your changes</h2><p class="muted small">Each can be undone until the next '
            f'consolidation, except forgetting, which erases the text for good.</p>'
            f'{_journal(d["journal"], v.secrets.csrf)}'
            f'{team_html(team, v.secrets.csrf)}'
            f'<h2>Ingested sessions</h2>{_sessions(d["sessions"])}'
            f'<h2>Parked batches</h2>{_parked(d["parked"], v.secrets.csrf)}'
            f'<h2>LLM usage</h2><p class="muted">{e(USAGE_NOTE)}</p><pre id="usage">{e(d["llm"])}</pre>'
            f'<h2>Last consolidation</h2>{consolidation}'
            f'<h2>Problems</h2><ul id="problems">{problems}<li><details id="doctor" '
            f'data-src="/activity/doctor"><summary>Every check <code>lore doctor</code> runs '
            f'(integrity, FTS, graph, vectors, WAL, file modes, locks): open to run them'
            f'</summary><div class="kids"><span class="muted">checking…</span></div></details>'
            f'</li></ul>')
    return HTMLResponse(page("Activity", body, flash=v.take_flash()))


async def doctor_checks(request: Request) -> Response:
    """What `lore doctor` (without --fix) finds; a page of its own because an integrity check
    of a large database takes seconds."""
    from ..maintenance.operations import doctor

    v = viewer_of(request)
    found = await v.run(lambda: doctor(v.settings))
    rows = "".join(f'<div class="leaf">{"ok" if f.ok else "<b>problem</b>"} · {e(f.check)}: '
                   f'{e(f.detail)}</div>' for f in found)
    broken = [f for f in found if not f.ok]
    advice = ('<div class="leaf">Run <code>lore doctor --fix</code> to repair what can be '
              'repaired.</div>' if broken else "")
    return HTMLResponse(rows + advice)
