"""A question a note asks is answered by the note that follows it (issue 30).

Memory keeps what was said in the order it was said: capture chains the facts of one slice by
temporal edges (capture/linking.py), and a conversation's turns follow one another the same
way. A prompt often repeats a question that was asked there ("how often do you take the kids
to the park?"), so the note that holds the prompt's words is the question, and the answer is
the note right after it, which holds other words ("a few times a week"). On keyword coverage
alone the question passes and its answer does not; search usually finds both (its spreading
activation lends the question's score to its neighbours), and the answer was left out by the
agreement rule or ranked below the question and its look-alikes.

So each candidate that asks (a sentence of its text ends with "?") brings the note its temporal edge leads to,
marked `follows` = the question's id: the judge (prompt_judge.answered) lets such a reply take
the better of its own evidence and its question's, and ranks the question itself by its
words in the branch only, since it asks and does not answer. A reply that search did not
bring joins the candidates right after its question, with its own cosine and coverage.
A memory of facts stored as statements holds few questions, and there this changes nothing
(the peer set's figures do not move: bench/README.md)."""

from __future__ import annotations

import re
from dataclasses import replace

from .prompt_candidates import MAX_PROMPT, chains, is_heading, paths
from .prompt_evidence import Candidate, with_coverage

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from ..core.types import Fragment
    from .memory import Memory


# A question mark that closes a sentence: after a word (or a quote or bracket closing one)
# and before a space, a closing quote or bracket, or the end. Not a URL's query string
# ("/search?q=x") nor a conditional expression ("a ? b : c"), which a project's notes hold.
_ASKS = re.compile(r"(?<=[\w\"')\]])\?+(?=[\s\"')\]]|$)")


def asks(frag: Fragment) -> bool:
    """Whether a note asks something: a sentence in its text ends with a question mark."""
    return bool(_ASKS.search(frag.summary) or _ASKS.search(frag.content))


def with_replies(memory: Memory, prompt: str, found: list[Candidate], seen: set[str]
                 ) -> list[Candidate]:
    """The candidates, each reply to a question among them marked `follows`, and the replies
    search did not bring added right after their question."""
    questions = {c.fragment.id for c in found if asks(c.fragment)}
    if not questions:
        return found
    store = memory.reader
    follows: dict[str, str] = {}  # reply id -> the question it follows
    for edge in store.edges_touching(sorted(questions), ("temporal",)):
        if edge.source in questions and edge.target not in seen:
            follows.setdefault(edge.target, edge.source)
    if not follows:
        return found
    have = {c.fragment.id for c in found}
    added = _fetch(memory, prompt, [r for r in follows if r not in have],
                   {c.fragment.id: c for c in found}, follows)
    out: list[Candidate] = []
    for c in found:
        fid = c.fragment.id
        out.append(replace(c, follows=follows[fid]) if fid in follows else c)
        out += added.get(fid, [])
    return out


def _fetch(memory: Memory, prompt: str, wanted: list[str], by_id: dict[str, Candidate],
           follows: dict[str, str]) -> dict[str, list[Candidate]]:
    """question id -> the replies to it that were not candidates, with their evidence."""
    if not wanted:
        return {}
    store = memory.reader
    text = prompt[:MAX_PROMPT]
    frags = [f for f in store.get_many(wanted).values()
             if not f.superseded_by and not is_heading(store, f)]
    qvec = memory.embed_one(text)  # search's vector: embed_one keeps its last text's
    sims = memory.index.similarities(qvec, [f.id for f in frags]) if qvec is not None else {}
    frags = [f for f in frags if f.id in sims]
    if not frags:
        return {}
    ancestry = chains(store, frags)
    where = paths(store, frags, ancestry)
    new = []
    for f in frags:
        q = by_id[follows[f.id]]
        new.append(Candidate(f, sims[f.id], q.branch, q.below, path=where.get(f.id, ""),
                             rank=q.rank, child=q.child, follows=q.fragment.id))
    out: dict[str, list[Candidate]] = {}
    for c in with_coverage(store, text, new, ancestry):
        out.setdefault(c.follows, []).append(c)
    return out
