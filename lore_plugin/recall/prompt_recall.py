"""Recall on each prompt: which remembered knowledge answers a prompt well enough to put in
front of the model before it answers, and the short framed text that carries it.

The answer, not its heading (issue 24 §2, issue 30): a topic or concept that matches the prompt
is a signpost, so the selection descends from it to the facts and details below that match
the prompt best, and only those are injected, each with its path ("Releases › Rollouts: …").
Two ways to judge "well enough", both measured on the benchmarks in bench/README.md
(bench/bench_prompt_recall.py):
- with the embedding model (the running MCP server): the fused evidence of prompt_judge.py,
  the answer's cosine with the prompt and how much of the prompt's rare words it holds;
- without it (the hook's fallback when no server answers): how many of the prompt's keyword
  terms the line that would be injected (path and text) holds, and what share of them."""

from __future__ import annotations

from dataclasses import replace

from ..safety.frame import neutralise
from . import render
from .prompt_evidence import Candidate, with_coverage
from .prompt_judge import judge
from .terms import fts_expression, held_terms, keyword_terms

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from ..core.config import Settings
    from ..core.types import Fragment
    from ..store import Store
    from .memory import Memory

BUDGET = 600  # characters of remembered text per prompt, item lines included
CANDIDATES = 10
MAX_PROMPT = 4000  # characters of the prompt searched for; the rest adds nothing but time
CHILDREN = 4  # the children of a matched heading closest to the prompt that compete as answers
DESCEND_LEVELS = 2  # how far below a matched topic or concept its answers are looked for
MIN_TERMS = 3  # keyword fallback: prompt terms the injected line must hold ...
MIN_COVERAGE = 0.6  # ... and the share of the prompt's terms they make up
LOCK_WAIT = 0.1  # seconds the socket waits for a tool call to finish; the hook waits 0.25 s
MIN_ITEM_CHARS = 40  # an item clipped shorter than this says nothing
PATH_CHARS = 24  # each ancestor's name in an item's path: the budget is for the answer
SEPARATOR = " › "
NOTICE = "Lore recalled these notes from earlier sessions because they match this prompt. " \
    + render.FRAMING


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


def is_heading(store: Store, frag: Fragment) -> bool:
    """A topic, or a concept with live children: its text names a branch, it does not answer.
    A concept without children (a note stored on its own) is knowledge in itself."""
    return frag.depth == 0 or (frag.depth == 1 and bool(store.child_ids(frag.id)))


def chains(store: Store, frags: list[Fragment]) -> dict[str, list[str]]:
    """Each fragment's ancestor ids, parent first."""
    return {f.id: store.ancestors(f.id) for f in frags}


def paths(store: Store, frags: list[Fragment],
          ancestry: dict[str, list[str]] | None = None) -> dict[str, str]:
    """Each fragment's ancestors' names, topic first: "Releases › Rollouts"."""
    ancestry = chains(store, frags) if ancestry is None else ancestry
    names = store.get_many(list({a for chain in ancestry.values() for a in chain}),
                           with_parent=False)
    return {fid: SEPARATOR.join(render.clip(names[a].summary, PATH_CHARS)
                                for a in reversed(chain) if a in names)
            for fid, chain in ancestry.items()}


def candidates(memory: Memory, prompt: str, seen: set[str], limit: int = CANDIDATES
               ) -> list[Candidate] | None:
    """The answers hybrid search points to, in its order (its fused evidence: meaning, words,
    neighbours, relevance), each with its evidence (prompt_evidence.Candidate): a fact it
    found stands where it was found; a topic or concept it found is replaced, where it
    stood, by the knowledge below it that is closest to the prompt. None when the model
    failed to load (the caller judges by words then)."""
    text = prompt[:MAX_PROMPT]
    found = memory.search(text, limit=limit)
    if found.keyword_only:
        return None
    store = memory.reader
    order: list[str] = []  # hits in search order; a heading's id stands for its answers
    cos: dict[str, float] = {}
    frags: dict[str, Fragment] = {}
    below: dict[str, list[str]] = {}
    branch: dict[str, float] = {}  # heading id -> its cosine
    for s in found.fragments:
        frag = s.fragment
        if frag.superseded_by or frag.id in seen:
            continue
        if is_heading(store, frag):
            below[frag.id] = [fid for fid, _ in store.descendant_ids(frag.id, DESCEND_LEVELS)
                              if fid not in seen]
            branch[frag.id] = s.similarity
        else:
            cos[frag.id], frags[frag.id] = s.similarity, frag
        order.append(frag.id)
    wanted = {fid for ids in below.values() for fid in ids} - set(cos)
    best: dict[str, list[str]] = {}  # heading id -> its closest answers
    if wanted:
        qvec = memory.embed_one(text)
        sims = memory.index.similarities(qvec, wanted) if qvec is not None else {}
        best = {h: sorted((i for i in ids if i in sims), key=sims.__getitem__,
                          reverse=True)[:CHILDREN * 3] for h, ids in below.items()}
        full = store.get_many([i for ids in best.values() for i in ids if i not in frags])
        for fid, frag in full.items():
            if not is_heading(store, frag):
                cos[fid], frags[fid] = sims[fid], frag
    out: dict[str, Candidate] = {}
    for rank, hit in enumerate(order):
        for fid in ([b for b in best[hit] if b in frags][:CHILDREN] if hit in best else [hit]):
            if fid in frags and fid not in out:
                parent = frags[fid].parent_id or ""
                out[fid] = Candidate(frags[fid], cos[fid],
                                     branch.get(hit, branch.get(parent, 0.0)), hit in best,
                                     rank=rank)
    listed = list(out.values())
    ancestry = chains(store, [c.fragment for c in listed])
    where = paths(store, [c.fragment for c in listed], ancestry)
    listed = [replace(c, path=where.get(c.fragment.id, "")) for c in listed]
    return with_coverage(store, text, listed, ancestry)


def strong_by_cosine(memory: Memory, prompt: str, seen: set[str]) -> list[Fragment]:
    answers = candidates(memory, prompt, seen)
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
    ids = [f.id for f, _ in store.keyword_search(expr, CANDIDATES)
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
    """One item in at most `room` characters: id, path, text, source and date."""
    head = f"- [{render.short_id(frag.id)}] " + (f"{neutralise(path)}: " if path else "")
    tail = f" (from: {render.source_label(frag)}, {render.when(frag.created_at)})"
    body = frag.summary
    if frag.content and frag.content.strip() != frag.summary.strip():
        body += " — " + frag.content
    space = room - len(head) - len(tail)
    if space < MIN_ITEM_CHARS:
        return None
    # Neutralised before it is clipped: NFKC can lengthen text, and the frame would again.
    return head + render.clip(neutralise(body), space) + tail


def compose(frags: list[Fragment], budget: int = BUDGET, store: Store | None = None,
            where: dict[str, str] | None = None) -> tuple[str | None, list[str]]:
    """The framed context and the ids it holds; (None, []) when nothing fits. With `store`
    (or the paths already read, `where`), each item carries its path."""
    lines: list[str] = []
    ids: list[str] = []
    if where is None:
        where = paths(store, frags) if store is not None and frags else {}
    own = where
    fill(frags, lambda frag, room: item_line(frag, room, own.get(frag.id, "")), lines, ids,
         budget)
    if not lines:
        return None, []
    return render.recalled("\n".join(lines), NOTICE), ids


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
