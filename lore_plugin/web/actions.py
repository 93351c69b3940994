"""The writes: each is a POST carrying the run's CSRF token, goes through the curator (the
memory engine's store, so FTS and vectors follow), and answers with a redirect to a page that
shows the result, so reloading never repeats it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..core.errors import InvalidInput, NotFound
from ..recall.render import clip, short_id
from .security import check_csrf, forbidden
from .viewer import viewer_of

ACTIONS = ("edit", "correct", "forget", "move", "confirm", "share", "unshare", "uncorrect")
SQLITE_MAX_INT = 2**63 - 1  # a number from a URL or a form beyond this cannot name a row


async def _form(request: Request) -> dict[str, str] | None:
    """The submitted fields, or None when the CSRF token is missing or wrong."""
    form = await request.form(max_files=0, max_fields=20)
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    return fields if check_csrf(viewer_of(request).secrets, fields.get("csrf")) else None


def _done(to: str) -> Response:
    return RedirectResponse(to, status_code=303)


async def fragment_action(request: Request) -> Response:
    v = viewer_of(request)
    fid, action = request.path_params["fid"], request.path_params["action"]
    if action not in ACTIONS:
        return Response("no such action", status_code=404, media_type="text/plain")
    form = await _form(request)
    if form is None:
        return forbidden("the form is missing this run's CSRF token; reload the page")
    if action in ("share", "unshare", "uncorrect"):  # issue 29: the team space (sharing.py)
        from . import sharing

        if action == "share":
            return await sharing.share_action(v, fid)
        if action == "unshare":
            return await sharing.unshare_action(v, fid)
        return await sharing.uncorrect_action(v, fid, form.get("entry", ""))
    cur = v.curator
    summary, content = form.get("summary", ""), form.get("content", "")
    if action == "edit":
        frag = await v.run(lambda: cur.edit(fid, summary, content))
        v.flash = "Saved. Undo it from Activity until the next consolidation."
    elif action == "correct":
        frag = await v.run(lambda: cur.correct(fid, summary, content))
        v.flash = "Correction saved; the old version stays below as history."
    elif action == "move":
        frag = await v.run(lambda: cur.move(fid, form.get("parent", "")))
        v.flash = "Moved."
    elif action == "confirm":
        frag = await v.run(lambda: cur.confirm(fid))
        v.flash = "Marked as confirmed."
    else:
        gone = await v.run(lambda: cur.forget(fid, form.get("children") == "1"))
        v.flash = f"Forgot {len(gone)} fragment(s) for good ([{short_id(gone[0])}])."
        return _done("/")
    return _done(f"/fragment/{frag.id}")


async def merge(request: Request) -> Response:
    v = viewer_of(request)
    form = await _form(request)
    if form is None:
        return forbidden("the form is missing this run's CSRF token; reload the page")
    survivor = await v.run(lambda: v.curator.merge(form.get("victim", ""),
                                                   form.get("survivor", "")))
    v.flash = "Merged. Undo it from Activity until the next consolidation."
    return _done(f"/fragment/{survivor.id}")


async def undo(request: Request) -> Response:
    v = viewer_of(request)
    form = await _form(request)
    if form is None:
        return forbidden("the form is missing this run's CSRF token; reload the page")
    entry = request.path_params["entry"]
    if entry > SQLITE_MAX_INT:
        raise NotFound(f"no journal entry {clip(str(entry), 30)}")
    v.flash = await v.run(lambda: v.curator.undo(entry))
    return _done("/activity")


async def retry(request: Request) -> Response:
    """Unparks one batch and starts a detached worker on its transcript, as a hook would."""
    v = viewer_of(request)
    form = await _form(request)
    if form is None:
        return forbidden("the form is missing this run's CSRF token; reload the page")
    path = form.get("file_path", "")
    try:
        start = int(form.get("start", ""))
    except ValueError:
        start = -1
    if not 0 <= start <= SQLITE_MAX_INT:
        raise InvalidInput("start must be a byte offset")
    if not await v.run(lambda: v.memory.writer.retry_batch(path, start, time.time())):
        raise InvalidInput("that batch is not waiting any more")
    log_dir = v.settings.log_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "worker.out", "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "lore_plugin.worker", "ingest", path],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, close_fds=True)
    threading.Thread(target=proc.wait, daemon=True).start()  # reaped, never a zombie
    v.flash = "Retrying that batch now; the activity page shows the outcome when it is done."
    return _done("/activity")
