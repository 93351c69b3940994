"""Which of a prompt's candidate answers were stored in the time it asks about (issue 30):
"what happened on 2025-01-10?", "what did we work on in early January?", "what did we do
last week?". Such a prompt names the time and little else, so no note holds its words and
the evidence silences it; the notes stored then are its answers. prompt_candidates marks
them (Candidate.dated) and the judge gives them, at most three in search's order, when
nothing else passes (prompt_judge.judge). Search has already put the notes of that time
first (it weighs a named time: recall/memory.py).

A note is of that time when it was stored then, or when its own text names a day or period
lying within it (Store.dated_near): a new user stores today, through store_memory, the work
of past days, each note titled with its day ("toast-analytics | 2025-01-10 | ..."), and every
one of them was created today.

Only a time that is over: "what's the weather today?" or "what's up this week?" names a
time and little else too, and in a memory filled this week every note was stored then."""

from __future__ import annotations

import re
from dataclasses import replace

from ..core.timeparse import DAY, MAX_WRITTEN_DAYS
from .prompt_evidence import with_coverage
from .prompt_judge import MIN_AGREEMENT
from .terms import keyword_terms

TYPE_CHECKING = False  # not typing's: importing typing costs the per-turn hooks ~3 ms
if TYPE_CHECKING:
    from datetime import tzinfo

    from ..core.timeparse import TimeWindow
    from ..store import Store
    from .prompt_evidence import Candidate

DAY_SPAN = 36 * 3600  # a prompt's named time this short is a day (a DST day has 25 hours)
OTHER_TERMS = 2  # a prompt about a time names at most this many other terms
PERIOD_SPAN = MAX_WRITTEN_DAYS * DAY  # the longest period whose notes answer: a quarter
_CAPITALISED = re.compile(r"\b[A-Z][\w'-]*")


def mark(store: Store, window: TimeWindow, now: float, text: str, found: list[Candidate],
         ancestry: dict[str, list[str]], tz: tzinfo | None = None) -> list[Candidate]:
    """The candidates, those stored in the window `text` names marked `dated`:
    - only when the time is over, and at most a quarter (a year holds anything);
    - only when the prompt names at most OTHER_TERMS other terms: then its words say what it
      asks, and the evidence judges that;
    - not when those name something this memory does not know (_asked);
    - a day: all its candidates; a longer period (a week, a month, a quarter) holds many
      notes, and the prompt's other words that the memory holds, if any, tell which of them
      it asks about: those that hold MIN_AGREEMENT of them (with their branch, as the judge
      reads coverage), the time's own words left out (a heading that names the month holds
      them).
    `ancestry`: each candidate's ancestor ids (prompt_candidates.chains); `tz`: the zone the
    days written in notes are read in (the memory's)."""
    span = window.end - window.start
    words = window.strip(text)
    others = len(keyword_terms(words))
    if window.end > now or span > PERIOD_SPAN or others > OTHER_TERMS:
        return found
    written = written_within(store, window, tz, {c.fragment.id for c in found})
    inside = [c for c in found if window.start <= c.fragment.created_at < window.end
              or c.fragment.id in written]
    if others and inside:
        asked = _asked(store, words, day=span <= DAY_SPAN)
        if asked is None:
            return found
        if asked and span > DAY_SPAN:
            agree = {c.fragment.id: c.coverage
                     for c in with_coverage(store, " ".join(asked), inside, ancestry)}
            inside = [c for c in inside if agree[c.fragment.id] >= MIN_AGREEMENT]
    marked = {c.fragment.id for c in inside}
    return [replace(c, dated=True) if c.fragment.id in marked else c for c in found]


def written_within(store: Store, window: TimeWindow, tz: tzinfo | None, ids: set[str]
                   ) -> set[str]:
    """Of `ids`, the notes whose own text names a day or period lying wholly within the
    window (a note naming a whole quarter is not one of a day's notes)."""
    from .dated import SCAN, day_span

    first, last = day_span(window.start, window.end, tz)
    return {fid for fid, periods in store.dated_near(first, last, SCAN).items()
            if fid in ids and any(first <= a and b <= last for a, b in periods)}


def _asked(store: Store, words: str, day: bool = False) -> list[str] | None:
    """The prompt's words that tell which of the time's notes it asks about: those the memory
    holds. One lowercase word no note holds is the question's own ("what happened in
    March?", "activities in early April"), and says nothing about which note; a name no note
    holds (a capitalised word), or two words, say that the prompt asks about something this
    memory does not know (None: nothing is marked). `day`: the time is one day, whose notes
    are few and all its answers, so only a name silences it: "work done on 2025-04-10"
    against a new user's memory, whose headings were made from its notes and none says
    "work", is the question's own words twice."""
    _, stats = store.term_statistics(keyword_terms(words))
    unknown = [term for term, (_, n) in stats.items() if n == 0]
    names = {t for raw in _CAPITALISED.findall(words) for t in keyword_terms(raw)}
    if names & set(unknown) or len(unknown) > 1 and not day:
        return None
    return [term for term, (_, n) in stats.items() if n > 0]
