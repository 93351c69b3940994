"""Recall on each prompt: which remembered knowledge answers a prompt well enough to put in
front of the model before it answers, and the short framed text that carries it.

The answer, not its heading (issue 24 §2, issue 30): a topic or concept that matches the prompt
is a signpost, so the selection descends from it to the facts and details below that match
the prompt best, and only those are injected, each with its path ("Releases › Rollouts: …")
unless the 600 characters are short: then a path gives way to the answers' texts (compose).
Where the answers are looked for (search, the descent, the prompt's rarest words) is
prompt_candidates.py.
Two ways to judge "well enough", both measured on the benchmarks in bench/README.md
(bench/bench_prompt_recall.py):
- with the embedding model (the running MCP server): the fused evidence of prompt_judge.py,
  the answer's cosine with the prompt and how much of the prompt's rare words it holds;
- without it (the hook's fallback when no server answers): how many of the prompt's keyword
  terms the line that would be injected (path and text) holds, and what share of them."""

from __future__ import annotations

from ..safety.frame import neutralise
from . import render
from .prompt_candidates import MAX_PROMPT, candidates, is_heading, paths
from .prompt_judge import judge
from .prompt_replies import with_replies
from .terms import fts_expression, held_terms, keyword_terms

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from ..core.config import Settings
    from ..core.types import Fragment
    from ..store import Store
    from .memory import Memory
    from .prompt_evidence import Candidate

__all__ = ["BUDGET", "NOTICE", "answer", "candidates", "compose", "gather", "is_heading", "open_socket",
           "paths", "serve", "strong_by_cosine", "strong_by_words", "term_match"]

BUDGET = 600  # characters of remembered text per prompt, item lines included
WORD_CANDIDATES = 10  # keyword fallback: FTS5's hits it judges
MIN_TERMS = 3  # keyword fallback: prompt terms the injected line must hold ...
MIN_COVERAGE = 0.6  # ... and the share of the prompt's terms they make up
LOCK_WAIT = 0.1  # seconds the socket waits for a tool call to finish; the hook waits 0.25 s
MIN_ITEM_CHARS = 40  # an item clipped shorter than this says nothing
NESTED = "  "  # before an item whose path is that of the item above it
NOTICE = "Lore recalled these notes from earlier sessions because they match this prompt. " \
    "An indented note has the same path as the note above it. " + render.FRAMING


def term_match(prompt_terms: list[str], frag: Fragment, path: str = "") -> tuple[int, float]:
    """(how many of the prompt's terms the fragment's line holds, their share of the
    prompt's); `path` is the branch names the line carries before the text."""
    if not prompt_terms:
        return 0, 0.0
    matched = held_terms(prompt_terms, f"{path} {frag.summary} {frag.content}")
    return matched, matched / len(prompt_terms)


def _words_hold(terms: list[str], frag: Fragment, path: str = "", min_terms: int = MIN_TERMS,
                min_coverage: float = MIN_COVERAGE) -> bool:
    matched, share = term_match(terms, frag, path)
    return matched >= min_terms and share >= min_coverage


def gather(memory: Memory, prompt: str, seen: set[str]) -> list[Candidate] | None:
    """The candidates the judge weighs: search's, the descent's and the rare words'
    (prompt_candidates), with the replies to the questions among them (prompt_replies).
    None when the model failed to load."""
    found = candidates(memory, prompt, seen)
    return None if found is None else with_replies(memory, prompt, found, seen)


def strong_by_cosine(memory: Memory, prompt: str, seen: set[str]) -> list[Fragment]:
    answers = gather(memory, prompt, seen)
    if answers is None:  # the model failed to load: judge by words instead
        return strong_by_words(memory.reader, prompt, seen)
    return judge(answers)


def strong_by_words(store: Store, prompt: str, seen: set[str], min_terms: int = MIN_TERMS,
                    min_coverage: float = MIN_COVERAGE) -> list[Fragment]:
    """FTS5's best candidates whose lines (path and text) hold enough of the prompt's terms,
    best first. A heading is replaced by those of its children that pass, holding one of the
    terms in their own text: the path carries the heading's words."""
    prompt = prompt[:MAX_PROMPT]
    expr = fts_expression(prompt)
    if expr is None:
        return []
    terms = keyword_terms(prompt)
    if len(terms) < min_terms:
        return []
    ids = [f.id for f, _ in store.keyword_search(expr, WORD_CANDIDATES)
           if not f.superseded_by and f.id not in seen]
    full = store.get_many(ids)
    found: list[Fragment] = []
    for fid in ids:
        frag = full.get(fid)
        if frag is None:
            continue
        if not is_heading(store, frag):
            found.append(frag)
            continue
        children = store.get_many([c for c in store.child_ids(fid) if c not in seen])
        found += sorted((c for c in children.values()
                         if term_match(terms, c)[0] > 0 and not is_heading(store, c)),
                        key=lambda c: term_match(terms, c)[0], reverse=True)
    unique = list({f.id: f for f in found}.values())
    lines = paths(store, unique)
    return [f for f in unique if _words_hold(terms, f, lines.get(f.id, ""), min_terms,
                                             min_coverage)]


def item_line(frag: Fragment, room: int, path: str = "") -> str | None:
    """One item in at most `room` characters: id, path, text, source and date; None when
    fewer than MIN_ITEM_CHARS of the text would fit."""
    got = _item(frag, room, path)
    return None if got is None else got[0]


def _item(frag: Fragment, room: int, path: str) -> tuple[str, str] | None:
    """(item_line's line, the text it shows)."""
    head = f"- [{render.short_id(frag.id)}] " + (f"{neutralise(path)}: " if path else "")
    tail = f" (from: {render.source_label(frag)}, {render.when(frag.created_at)})"
    body = frag.summary
    if frag.content and frag.content.strip() != frag.summary.strip():
        body += " — " + frag.content
    space = room - len(head) - len(tail)
    if space < MIN_ITEM_CHARS:
        return None
    # Neutralised before it is clipped: NFKC can lengthen text, and the frame would again.
    shown = render.clip(neutralise(body), space)
    return head + shown + tail, shown


Layout = list[tuple[str, str, str, str]]  # (branch, id, line, the text it shows) an item


def compose(frags: list[Fragment], budget: int = BUDGET, store: Store | None = None,
            where: dict[str, str] | None = None, path_yields: bool = True
            ) -> tuple[str | None, list[str]]:
    """The framed context and the ids it holds; (None, []) when nothing fits. Each answer
    gets all the room it needs, best first, the next ones what remains. With `store` (or the
    paths already read, `where`), each item carries its path, once: a further item with a
    path already shown sits indented under the first, without it. `path_yields`: the paths
    are signposts, the texts the answers (issue 30), so a path is shown only when the
    answers' texts keep all they would show without paths (the last paths are the first
    left out: a path is some 50 characters of the 600)."""
    if where is None:
        where = paths(store, frags) if store is not None and frags else {}
    signposts = list(dict.fromkeys(p for p in (where.get(f.id, "") for f in frags) if p))
    layout = _layout(frags, where, budget)
    if path_yields and signposts:
        bare = _texts(_layout(frags, {}, budget))
        keep = len(signposts)
        while keep and _texts(layout) != bare:
            keep -= 1
            kept = set(signposts[:keep])
            layout = _layout(frags, {k: v for k, v in where.items() if v in kept}, budget)
    if not layout:
        return None, []
    branches: dict[str, list[str]] = {}  # path -> its lines, in the order paths first came
    for key, _, line, _ in layout:
        branches.setdefault(key, []).append(line)
    body = "\n".join(line for lines in branches.values() for line in lines)
    return render.recalled(body, NOTICE), [fid for _, fid, _, _ in layout]


def _layout(frags: list[Fragment], where: dict[str, str], budget: int) -> Layout:
    """(the branch an item is listed under, its id, its line, the text it shows) for the
    answers that fit, best first, each given all the room that is left."""
    out: Layout = []
    shown: set[str] = set()
    room = budget
    for frag in frags:
        path = where.get(frag.id, "")
        nested = bool(path) and path in shown
        got = _item(frag, room - len(NESTED), "") if nested else _item(frag, room, path)
        if got is None:
            break
        line = NESTED + got[0] if nested else got[0]
        shown.add(path)
        out.append((path or frag.id, frag.id, line, got[1]))
        room -= len(line) + 1
    return out


def _texts(layout: Layout) -> list[tuple[str, str]]:
    return [(fid, text) for _, fid, _, text in layout]


def fill(frags: list[Fragment], line_for: Callable[[Fragment, int], str | None],
         lines: list[str], ids: list[str], room: int) -> int:
    """Appends one line per fragment, best first, while each fits in `room` characters (the
    first that does not ends it); returns the room left."""
    for frag in frags:
        line = line_for(frag, room)
        if line is None:
            break
        lines.append(line)
        ids.append(frag.id)
        room -= len(line) + 1
    return room


def answer(memory: Memory, request: dict, warm: bool) -> dict:
    """The server's answer to one hook request: {"context": text or None, "ids": [...]}.
    Before the model is warm it judges by words, on the server's open connection, rather than
    make the prompt wait for the model to load."""
    prompt = request.get("prompt")
    seen = request.get("seen")
    if not isinstance(prompt, str) or not prompt.strip():
        return {"context": None, "ids": []}
    seen_ids = {s for s in seen if isinstance(s, str)} if isinstance(seen, list) else set()
    frags = (strong_by_cosine(memory, prompt, seen_ids) if warm
             else strong_by_words(memory.reader, prompt, seen_ids))
    text, ids = compose(frags, store=memory.reader)
    return {"context": text, "ids": ids, "judged_by": "cosine" if warm else "words"}


def serve(lock: threading.Lock, memory: Memory, warm: threading.Event, request: dict,
          answering: Callable[[Memory, dict, bool], dict] | None = None) -> dict:
    """One request on the server's socket. A tool call holding the memory longer than
    LOCK_WAIT answers "busy", and the hook searches by keywords itself. `answering` replaces
    `answer` (issue 29: with the team space's notes, team_notes.py)."""
    if not lock.acquire(timeout=LOCK_WAIT):
        return {"busy": True}
    try:
        return (answering or answer)(memory, request, warm.is_set())
    finally:
        lock.release()


def open_socket(settings: Settings, lock: threading.Lock, memory: Memory,
                warm: threading.Event, answering: Callable[[Memory, dict, bool], dict] | None = None
                ) -> Callable[[], None]:
    """Starts the MCP server's private socket for the per-prompt hook (prompt_socket.py) and
    returns what closes it. Off with `[recall] on_prompt = false`; a socket that cannot be
    made only means the hook falls back to keyword search."""
    if not settings.recall_on_prompt:
        return lambda: None
    import logging

    from .prompt_socket import Listener

    listener = Listener(str(settings.home), str(settings.db_path),
                        lambda request: serve(lock, memory, warm, request, answering))
    try:
        listener.start()
    except OSError as exc:
        logging.getLogger("lore.server").warning("no socket for the per-prompt hook: %s", exc)
        listener.close()
        return lambda: None
    return listener.close
