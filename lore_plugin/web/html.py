"""HTML building blocks: escaping, the page layout, and the one stylesheet and script, served
from this process (nothing is loaded from the network: the viewer works offline).

Pages are built with f-strings through `e()`, which escapes every value: memory text is data a
past session wrote, never markup."""

from __future__ import annotations

import html
import time

from ..core.types import Fragment, depth_name
from ..recall.render import source_label

CSS = """
:root { --fg:#1d232a; --muted:#5d6b78; --line:#d8dee4; --bg:#fbfcfd; --accent:#2f5d8a;
        --warn:#9a3412; --ok:#166534; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       color:var(--fg); background:var(--bg); }
header { display:flex; gap:1.2rem; align-items:center; padding:.6rem 1.2rem;
         border-bottom:1px solid var(--line); background:#fff; }
header b { font-size:1.05rem; } header a { color:var(--accent); text-decoration:none; }
header form { margin-left:auto; display:flex; gap:.3rem; }
main { max-width:68rem; padding:1rem 1.2rem 3rem; }
a { color:var(--accent); } .muted { color:var(--muted); } .small { font-size:.85rem; }
h1 { font-size:1.35rem; margin:.4rem 0 .8rem; } h2 { font-size:1.05rem; margin:1.4rem 0 .5rem; }
details { margin:.15rem 0 .15rem .2rem; } details > summary { cursor:pointer; }
.kids { margin-left:1.3rem; border-left:1px dotted var(--line); padding-left:.5rem; }
.leaf { margin:.15rem 0 .15rem 1.2rem; }
.tag { display:inline-block; font-size:.75rem; padding:0 .35rem; border:1px solid var(--line);
       border-radius:.6rem; color:var(--muted); margin-left:.3rem; }
.flash { padding:.5rem .8rem; border:1px solid #9cc3a4; background:#eef8f0; border-radius:.3rem; }
.error { padding:.5rem .8rem; border:1px solid #e0a58f; background:#fdf1ec; border-radius:.3rem; }
table { border-collapse:collapse; width:100%; } td, th { text-align:left; padding:.25rem .5rem;
        border-bottom:1px solid var(--line); vertical-align:top; }
pre { white-space:pre-wrap; background:#f3f5f7; padding:.6rem; border-radius:.3rem; }
.content { white-space:pre-wrap; background:#fff; border:1px solid var(--line); padding:.6rem;
           border-radius:.3rem; }
form.inline { display:inline; } .actions form { margin:.6rem 0; padding:.6rem;
              border:1px solid var(--line); border-radius:.3rem; background:#fff; }
textarea { width:100%; min-height:5rem; font:inherit; } input[type=text] { font:inherit; }
select { max-width:18rem; }
button { font:inherit; cursor:pointer; } button.danger { color:var(--warn); }
.result { margin:.5rem 0; padding:.4rem .6rem; background:#fff; border:1px solid var(--line);
          border-radius:.3rem; }
"""

# Children of a tree node load when it is opened; writes that cannot be undone ask first.
JS = """
document.addEventListener('toggle', function (ev) {
  var node = ev.target;
  if (!node.open || !node.dataset || !node.dataset.src || node.dataset.loaded) return;
  node.dataset.loaded = '1';
  var box = node.querySelector('.kids');
  fetch(node.dataset.src, {credentials: 'same-origin'}).then(function (r) {
    return r.text();
  }).then(function (text) { box.innerHTML = text; });
}, true);
document.addEventListener('submit', function (ev) {
  var ask = ev.target.dataset && ev.target.dataset.confirm;
  if (ask && !window.confirm(ask)) ev.preventDefault();
}, true);
"""


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def when(ts: float | None) -> str:
    return "—" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def page(title: str, body: str, flash: str = "", error: str = "") -> str:
    note = (f'<p class="flash" id="flash">{e(flash)}</p>' if flash else "") + (
        f'<p class="error" id="error">{e(error)}</p>' if error else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)} · Lore</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/app.css"><script src="/static/app.js" defer></script>
</head><body>
<header><b>Lore</b><a href="/">Topics</a><a href="/activity">Activity</a>
<form action="/search" method="get"><input type="text" name="q" placeholder="Search memory"
 aria-label="search"><button>Search</button></form></header>
<main>{note}<h1>{e(title)}</h1>
{body}
</main></body></html>"""


def frag_link(frag: Fragment) -> str:
    return f'<a href="/fragment/{e(frag.id)}">{e(frag.summary)}</a>'


def frag_tags(frag: Fragment, space: str = "local") -> str:
    """Depth, relevance, source and the space it is kept in (issue 28: "local" is this
    machine's file, anything else a hub space)."""
    tags = [depth_name(frag.depth), f"relevance {frag.relevance_score:.2f}", source_label(frag),
            f"space {space}"]
    if frag.superseded_by:
        tags.append("superseded")
    return "".join(f'<span class="tag">{e(t)}</span>' for t in tags)


def csrf_field(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{e(token)}">'


def post_button(action: str, label: str, csrf: str, fields: dict[str, str] | None = None,
                confirm: str = "", danger: bool = False) -> str:
    hidden = "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">'
                     for k, v in (fields or {}).items())
    ask = f' data-confirm="{e(confirm)}"' if confirm else ""
    cls = ' class="danger"' if danger else ""
    return (f'<form class="inline" method="post" action="{e(action)}"{ask}>{csrf_field(csrf)}'
            f'{hidden}<button{cls}>{e(label)}</button></form>')
