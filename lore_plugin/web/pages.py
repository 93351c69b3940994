"""The pages that only read: the topic tree (a page of topics, children fetched when a node is
opened, so 100K fragments cost what one page costs), search through the engine behind
query_memory, and one fragment with its neighbours, history and the curation forms."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from ..core.errors import InvalidInput, NotFound
from ..core.types import Fragment, depth_name
from ..recall.memory import MAX_DEPTH
from ..recall.render import clip, short_id, source_label
from .html import csrf_field, e, frag_link, frag_tags, page, post_button, when
from .viewer import viewer_of

TOPICS_PER_PAGE = 100
CHILDREN_SHOWN = 200
SEARCH_LIMIT = 20



def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, got {clip(raw, 20)!r}") from None
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be from {low} to {high}")
    return value


def node(frag: Fragment, kids: int) -> str:
    """One tree row; a row with children opens to fetch them."""
    count = f'<span class="tag">{kids} {"child" if kids == 1 else "children"}</span>' if kids else ""
    if not kids:
        return f'<div class="leaf">{frag_link(frag)}{frag_tags(frag)}</div>'
    return (f'<details data-src="/children?id={e(frag.id)}"><summary>{frag_link(frag)}{count}'
            f'{frag_tags(frag)}</summary><div class="kids"><span class="muted">loading…</span>'
            f'</div></details>')


async def tree(request: Request) -> Response:
    v = viewer_of(request)
    number = int_param(request, "page", 0, 0, 1_000_000)

    def load() -> tuple[list[Fragment], dict[str, int], int]:
        store = v.memory.reader
        ids, total = store.topic_page(number * TOPICS_PER_PAGE, TOPICS_PER_PAGE)
        frags = store.get_many(ids, with_parent=False)
        return [frags[i] for i in ids if i in frags], store.child_counts(ids), total

    topics, kids, total = await v.run(load)
    rows = "".join(node(t, kids.get(t.id, 0)) for t in topics) or (
        '<p class="muted">Memory is empty: no topics yet.</p>')
    first = number * TOPICS_PER_PAGE
    nav = []
    if number:
        nav.append(f'<a href="/?page={number - 1}">← previous</a>')
    if first + TOPICS_PER_PAGE < total:
        nav.append(f'<a href="/?page={number + 1}">next →</a>')
    body = (f'<p class="muted">{total} topics; showing {first + 1 if topics else 0}–'
            f'{first + len(topics)}, most relevant first. Open a topic to load what is below '
            f'it.</p><div id="tree">{rows}</div><p>{" · ".join(nav)}</p>')
    return HTMLResponse(page("Topics", body, flash=v.take_flash()))


async def children(request: Request) -> Response:
    v = viewer_of(request)
    fid = request.query_params.get("id", "")

    def load() -> tuple[list[Fragment], dict[str, int], int]:
        store = v.memory.reader
        ids = store.child_ids(store.resolve_id(fid))
        frags = store.get_many(ids[:CHILDREN_SHOWN], with_parent=False)
        shown = sorted(frags.values(), key=lambda f: -f.relevance_score)
        return shown, store.child_counts([f.id for f in shown]), len(ids)

    shown, kids, total = await v.run(load)
    more = (f'<div class="leaf muted">… {total - len(shown)} more: open the '
            f'<a href="/fragment/{e(fid)}">fragment</a></div>' if total > len(shown) else "")
    return HTMLResponse("".join(node(f, kids.get(f.id, 0)) for f in shown) + more)


async def search(request: Request) -> Response:
    v = viewer_of(request)
    text = request.query_params.get("q", "").strip()
    raw_depth = request.query_params.get("depth", "1")
    depth = None if raw_depth == "any" else int_param(request, "depth", 1, 0, MAX_DEPTH)
    project = request.query_params.get("project", "") or None
    limit = int_param(request, "limit", SEARCH_LIMIT, 1, 100)

    def run() -> tuple[list, bool, list[str], dict[str, str]]:
        memory = v.memory
        projects = memory.reader.projects()
        if not text:
            return [], False, projects, {}
        saved, memory.project = memory.project, project
        try:  # the same engine and ranking as query_memory, without reinforcing anything
            spaces = v.spaces() if depth is not None else None
            if spaces is not None:  # with a hub: the local file and the hub spaces
                fused = spaces.query(text, depth or 0, limit, reinforce=False)
                return ([(h.scored, h.space) for h in fused.hits], fused.keyword_only,
                        projects, fused.unreachable)
            found = (memory.search(text, limit=limit) if depth is None else
                     memory.query(text, depth=depth, limit=limit, reinforce=False))
        finally:
            memory.project = saved
        return [(s, "local") for s in found.fragments], found.keyword_only, projects, {}

    results, keyword_only, projects, missed = await v.run(run)
    depths = "".join(f'<option value="{d}"{" selected" if d == depth else ""}>{d} '
                     f'({depth_name(d)})</option>' for d in range(0, 4))
    depths += f'<option value="any"{" selected" if depth is None else ""}>any depth</option>'
    chosen = "".join(f'<option{" selected" if p == project else ""}>{e(p)}</option>'
                     for p in projects)
    form = (f'<form method="get" action="/search"><input type="text" name="q" value="{e(text)}" '
            f'size="50" aria-label="query"> depth <select name="depth">{depths}</select> '
            f'project <select name="project"><option value="">none</option>{chosen}</select> '
            f'<button>Search</button></form>')
    note = ('<p class="muted">Keyword search only: the embedding model is not loaded.</p>'
            if keyword_only else "")
    note += "".join(f'<p class="muted">Space {e(s)} not reached: {e(clip(why, 200))}</p>'
                    for s, why in missed.items())
    items = []
    for r, space in results:
        f = r.fragment
        body = (f'<div class="small">{e(clip(f.content, 300))}</div>'
                if f.content and f.content.strip() != f.summary.strip() else "")
        name = frag_link(f) if space == "local" else e(f.summary)  # pages show the local file
        items.append(f'<div class="result">{name}<span class="tag">match {r.score:.2f}'
                     f'</span><span class="tag">similarity {r.similarity:.2f}</span>'
                     f'{frag_tags(f, space)}{body}</div>')
    listing = "".join(items) or (f'<p class="muted">Nothing matches “{e(text)}” at this depth.'
                                 f'</p>' if text else "")
    title = f"Search: {clip(text, 60)}" if text else "Search"
    return HTMLResponse(page(title, form + note + f'<div id="results">{listing}</div>',
                             flash=v.take_flash()))


def _neighbours(title: str, frags: list[Fragment], notes: list[str] | None = None) -> str:
    if not frags:
        return f"<h2>{e(title)}</h2><p class=\"muted\">none</p>"
    rows = "".join(f'<li>{frag_link(f)}{frag_tags(f)}{" " + e(notes[i]) if notes else ""}</li>'
                   for i, f in enumerate(frags))
    return f"<h2>{e(title)}</h2><ul>{rows}</ul>"


def _history(store, frag: Fragment) -> list[tuple[str, Fragment]]:  # noqa: ANN001
    """Newer versions (what replaced it) and older ones (what it replaced), nearest first."""
    chain: list[tuple[str, Fragment]] = []
    seen = {frag.id}
    newer = frag.superseded_by
    while newer and newer not in seen and len(chain) < 20:
        seen.add(newer)
        try:
            f = store.get(newer)
        except NotFound:  # a dangling pointer (lore doctor repairs it) ends the chain
            break
        chain.append(("replaced by", f))
        newer = f.superseded_by
    queue = store.older_versions(frag.id)
    while queue and len(chain) < 40:
        old = queue.pop(0)
        if old in seen:
            continue
        seen.add(old)
        chain.append(("replaces", store.get(old)))
        queue += store.older_versions(old)
    return chain


async def fragment(request: Request) -> Response:
    v = viewer_of(request)
    fid = request.path_params["fid"]

    def load() -> dict:
        memory, store = v.memory, v.memory.reader
        frag = memory.get(fid)
        kids = memory.children(frag.id)
        return {"frag": frag, "parent": memory.parent(frag.id), "children": kids,
                "assoc": memory.associations(frag.id), "history": _history(store, frag),
                "below": store.descendant_counts([frag.id]).get(frag.id, 0)}

    d = await v.run(load)
    f: Fragment = d["frag"]
    facts = [("id", e(f.id)), ("depth", e(f"{f.depth} ({depth_name(f.depth)})")),
             ("source", e(source_label(f))), ("basis", e(f.basis or "—")),
             ("confirmed", e(when(f.confirmed_at))), ("created", e(when(f.created_at))),
             ("last accessed", e(f"{when(f.last_accessed)} ({f.access_count}×)")),
             ("last reinforced", e(when(f.last_reinforced))),
             ("relevance", e(f"{f.relevance_score:.3f} (importance {f.importance:.2f}, decay "
                             f"{f.decay_rate:.3f}/day)")),
             ("project", e(f.project or "—")), ("session", e(f.source_session or "—")),
             ("below it", e(f"{d['below']} fragments"))]
    rows = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in facts)
    body = (f'<table id="facts">{rows}</table><h2>Content</h2>'
            f'<div class="content" id="content">{e(f.content)}</div>')
    body += _neighbours("Parent", [d["parent"]] if d["parent"] else [])
    body += _neighbours("Children", d["children"])
    body += _neighbours("Associations", [a[0] for a in d["assoc"]],
                        [f"({k}, {w:.2f})" for _, k, w in d["assoc"]])
    history = "".join(f"<li>{e(how)} {frag_link(g)} <span class=\"muted small\">"
                      f"{e(when(g.created_at))}</span></li>" for how, g in d["history"])
    body += f"<h2>Versions</h2><ul>{history}</ul>" if history else (
        '<h2>Versions</h2><p class="muted">no other versions</p>')
    body += curation_forms(f, v.secrets.csrf)
    from .sharing import share_form  # issue 29

    body += share_form(v, f)
    return HTMLResponse(page(clip(f.summary, 90), body, flash=v.take_flash()))


def curation_forms(f: Fragment, csrf: str) -> str:
    if f.superseded_by:
        return (f'<h2>Curate</h2><p class="muted">This version was replaced; curate '
                f'<a href="/fragment/{e(f.superseded_by)}">the current one</a>.</p>')
    act = f"/fragment/{e(f.id)}"
    text = (f'<label>Summary<br><input type="text" name="summary" value="{e(f.summary)}" '
            f'size="80"></label><br><label>Content<br><textarea name="content">{e(f.content)}'
            f'</textarea></label>')
    forms = [
        f'<form method="post" action="{act}/edit" id="edit">{csrf_field(csrf)}<b>Edit</b> '
        f'<span class="muted small">(same fragment, new text, re-embedded)</span><br>{text}'
        f'<button>Save</button></form>',
        f'<form method="post" action="{act}/correct" id="correct">{csrf_field(csrf)}<b>Correct'
        f'</b> <span class="muted small">(a new fragment replaces this one, which stays as '
        f'history)</span><br>{text}<button>Save correction</button></form>',
    ]
    if f.depth == 0:
        forms.append(f'<form method="post" action="/merge" id="merge">{csrf_field(csrf)}<b>Merge'
                     f'</b> this topic into topic id <input type="hidden" name="victim" '
                     f'value="{e(f.id)}"><input type="text" name="survivor" size="14" '
                     f'aria-label="survivor"> <button>Merge</button></form>')
    else:
        forms.append(f'<form method="post" action="{act}/move" id="move">{csrf_field(csrf)}'
                     f'<b>Move</b> under the {depth_name(f.depth - 1)} with id <input '
                     f'type="text" name="parent" size="14" aria-label="new parent"> '
                     f'<button>Move</button></form>')
    confirm = (post_button(f"{act}/confirm", "Mark as confirmed", csrf)
               if f.confirmed_at is None else '<span class="muted">confirmed</span>')
    keep = ("" if f.depth == 0 else post_button(
        f"{act}/forget", "Forget (children move up)", csrf, danger=True,
        confirm="Forget this fragment for good? This cannot be undone."))
    gone = post_button(f"{act}/forget", "Forget with everything below", csrf,
                       {"children": "1"}, danger=True,
                       confirm="Forget this fragment and everything below it for good? "
                               "This cannot be undone.")
    forms.append(f'<div>{confirm} {keep} {gone} '
                 f'<span class="muted small">Forgetting erases the text for good and cannot be '
                 f'undone; every other change can be undone from '
                 f'<a href="/activity">Activity</a> until the next consolidation.</span></div>')
    return f'<h2>Curate [{e(short_id(f.id))}]</h2><div class="actions">{"".join(forms)}</div>'
