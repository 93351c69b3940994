"""The answers a prompt might get (issue 30): where the per-prompt selection looks before it
judges (prompt_judge.py).

Four ways in, each catching what the others miss:
- hybrid search's hits, in its order (meaning, words, neighbours, relevance fused), each a
  different answer: a heading that only copies a hit below it gives it its place
  (copy_chains.py);
- the descent: a topic or concept that search found is a signpost, not an answer, so it is
  replaced, where it stood, by the knowledge below it closest to the prompt;
- the prompt's rarest words: a keyword search on the few terms of the prompt that this
  memory holds least often (a name, a place, an error code). A fact that holds them but whose
  meaning, by MiniLM, sits among many similar ones (everyday chat, a dozen notes on one
  project) drops out of hybrid search's first hits; its words still say it is the one asked
  about. These come after search's hits and compete on the same evidence;
- the neighbours in time of search's answers: the note stored right before or after one
  (capture chains siblings by temporal edges). An answer often sits next to the line that
  holds the prompt's words: the reply to a question in a conversation, the outcome after
  the attempt. With them the answer is among LoCoMo's candidates for 0.90 of prompts instead
  of 0.83 (bench/README.md). They come last; on their own evidence they seldom pass.

A prompt about a time that is over ("what happened on 2025-01-10?", "what did we work on
last week?") names the time and little else, so no note holds its words; the notes stored
then are its answers (prompt_dated.py marks them `dated`; the judge gives them when nothing
else passes).

Each candidate carries where it came from (its search place, its place among its heading's
children, its place among the rare-word hits), so the benchmark can tell which way in found
what (bench/prompt_cases.py)."""

from __future__ import annotations

from dataclasses import replace

from . import render
from .copy_chains import plain_path
from .prompt_evidence import Candidate, with_coverage

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from ..core.types import Fragment
    from ..store import Store
    from .memory import Memory

CANDIDATES = 10  # hybrid search hits ...
HITS_READ = 3  # ... ranked CANDIDATES x this many deep: a heading copying a hit gives it its
#   place (Memory.search_distinct), and placement's chains are three hits (topic, concept, fact)
CHILDREN = 4  # the children of a matched heading closest to the prompt that compete as answers
DESCEND_LEVELS = 2  # how far below a matched topic or concept its answers are looked for
RARE_TERMS = 3  # the prompt's rarest terms the extra keyword search asks for ...
RARE_HITS = 5  # ... and how many of its hits join the candidates (0: no such search)
NEIGHBOURS_OF = 10  # the first answers in search's order whose neighbours in time join
MAX_PROMPT = 4000  # characters of the prompt searched for; the rest adds nothing but time
PATH_CHARS = 24  # each ancestor's name in an item's path: the budget is for the answer
SEPARATOR = " › "


def is_heading(store: Store, frag: Fragment) -> bool:
    """A topic, or a concept with live children: its text names a branch, it does not answer.
    A concept without children (a note stored on its own) is knowledge in itself."""
    return frag.depth == 0 or (frag.depth == 1 and bool(store.child_ids(frag.id)))


def chains(store: Store, frags: list[Fragment]) -> dict[str, list[str]]:
    """Each fragment's ancestor ids, parent first."""
    return {f.id: store.ancestors(f.id) for f in frags}


def paths(store: Store, frags: list[Fragment],
          ancestry: dict[str, list[str]] | None = None) -> dict[str, str]:
    """Each fragment's ancestors' names, topic first: "Releases › Rollouts", without the
    levels that only copy the level below them or the fragment (copy_chains.plain_path)."""
    ancestry = chains(store, frags) if ancestry is None else ancestry
    names = store.get_many(list({a for chain in ancestry.values() for a in chain}),
                           with_parent=False)
    own = {f.id: f for f in frags}
    return {fid: SEPARATOR.join(render.clip(level.summary, PATH_CHARS) for level in plain_path(
                [names[a] for a in reversed(chain) if a in names], own[fid]))
            for fid, chain in ancestry.items() if fid in own}


def rare_expression(store: Store, prompt: str, most: int = RARE_TERMS) -> str | None:
    """An FTS5 OR of the prompt's `most` rarest terms that the memory holds at all (a term no
    row holds finds nothing); None when it holds none."""
    from .terms import keyword_terms, quoted_or

    _, stats = store.term_statistics(keyword_terms(prompt))
    held = sorted((n, term) for term, (_, n) in stats.items() if n > 0)
    return quoted_or([t for _, t in held[:most]]) if held else None


def candidates(memory: Memory, prompt: str, seen: set[str], limit: int = CANDIDATES,
               children: int = CHILDREN, rare_hits: int = RARE_HITS,
               neighbours_of: int = NEIGHBOURS_OF) -> list[Candidate] | None:
    """The answers search, the descent and the rare words point to, search's first, each with
    its evidence (prompt_evidence.Candidate). None when the model failed to load (the caller
    judges by words then)."""
    text = prompt[:MAX_PROMPT]
    # Ten hits for ten different answers: a heading that copies a hit (copy_chains.py) gives
    # that hit its place, and the hits after the tenth fill in.
    found = memory.search_distinct(text, limit, HITS_READ)
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
    rare = _rare_hits(store, text, seen, rare_hits) if rare_hits > 0 else []
    near = _neighbours(store, [h for h in order if h in cos][:neighbours_of], seen)
    wanted = ({fid for ids in below.values() for fid in ids} | set(rare) | set(near)) - set(cos)
    best: dict[str, list[str]] = {}  # heading id -> its closest answers
    if wanted:
        qvec = memory.embed_one(text)
        sims = memory.index.similarities(qvec, wanted) if qvec is not None else {}
        best = {h: sorted((i for i in ids if i in sims), key=sims.__getitem__,
                          reverse=True)[:children * 3] for h, ids in below.items()}
        rare = [i for i in rare if i in cos or i in sims]
        near = [i for i in near if i in cos or i in sims]
        full = store.get_many([i for i in {*rare, *near,
                                           *(i for ids in best.values() for i in ids)}
                               if i not in frags])
        for fid, frag in full.items():
            if not is_heading(store, frag) and not frag.superseded_by:
                cos[fid], frags[fid] = sims[fid], frag
    out: dict[str, Candidate] = {}
    for rank, hit in enumerate(order):
        kids = [b for b in best[hit] if b in frags][:children] if hit in best else [hit]
        for place, fid in enumerate(kids):
            if fid in frags and fid not in out:
                parent = frags[fid].parent_id or ""
                out[fid] = Candidate(frags[fid], cos[fid],
                                     branch.get(hit, branch.get(parent, 0.0)), hit in best,
                                     rank=rank, child=place if hit in best else -1)
    for place, fid in enumerate(i for i in rare if i in frags):
        got = out.get(fid)
        out[fid] = (replace(got, rare=place) if got is not None else
                    Candidate(frags[fid], cos[fid], 0.0, False, rank=len(order) + place,
                              rare=place))
    # A neighbour comes after everything else: on its own evidence it is rarely the answer
    # (placed at its source's rank, it displaced answers: bench/README.md).
    for place, fid in enumerate(near):
        if fid in frags and fid not in out:
            out[fid] = Candidate(frags[fid], cos[fid], 0.0, False,
                                 rank=len(order) + rare_hits + place)
    listed = list(out.values())
    ancestry = chains(store, [c.fragment for c in listed])
    where = paths(store, [c.fragment for c in listed], ancestry)
    listed = [replace(c, path=where.get(c.fragment.id, "")) for c in listed]
    listed = with_coverage(store, text, listed, ancestry)
    return _dated(memory, text, _with_cues(memory, text, listed), ancestry)


def _with_cues(memory: Memory, text: str, found: list[Candidate]) -> list[Candidate]:
    """The candidates, each with the cosine of its closest cue phrase (Candidate.cue)."""
    if not found:
        return found
    from .cue_closeness import cue_cosines

    near = cue_cosines(memory.reader, memory.embed_one(text), [c.fragment.id for c in found])
    return [replace(c, cue=near[c.fragment.id]) if c.fragment.id in near else c for c in found]


def _rare_hits(store: Store, text: str, seen: set[str], most: int) -> list[str]:
    """The ids of the best keyword matches for the prompt's rarest terms, best first."""
    expr = rare_expression(store, text)
    if expr is None:
        return []
    return [f.id for f, _ in store.keyword_search(expr, most)
            if not f.superseded_by and f.id not in seen]


def _neighbours(store: Store, sources: list[str], seen: set[str]) -> list[str]:
    """The notes stored right before and after each source, under the same parent (temporal
    edges, which capture chains siblings by), the first source's first."""
    if not sources:
        return []
    edges = store.edges_touching(sources, ("temporal",))
    out: dict[str, None] = {}
    for src in sources:
        for e in edges:
            other = e.target if e.source == src else e.source if e.target == src else None
            if other and other not in seen and other not in sources:
                out.setdefault(other)
    return list(out)


def _dated(memory: Memory, text: str, found: list[Candidate],
           ancestry: dict[str, list[str]]) -> list[Candidate]:
    """The candidates, those stored in the time the prompt asks about marked (prompt_dated)."""
    from ..core import timeparse

    now = memory.clock()
    window = timeparse.parse(text, now, memory.tz)
    if window is None:
        return found
    from .prompt_dated import mark

    return mark(memory.reader, window, now, text, found, ancestry, memory.tz)
