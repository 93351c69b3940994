"""A prompt worded the way someone would ask for a note (issue 30): the note one of whose
cues the prompt is close to, when nothing else passes the gate.

A note's cues (core/cues.py) are the ways its writer expected it to be asked for: "dashboard
charting library choice" beside "Decision 2026-09-22: Recharts over Chart.js". A question
in other words than the note ("what do we use to draw charts in the web app?") holds few of
its words and MiniLM rates it far from the note (0.46), too far for the gate, yet close to
the cue: a question and a way of asking are the same kind of text. So the cue's cosine is
evidence of its own (Candidate.cue, the closest phrase's), and it speaks when:

- the closest cue is close (MIN_CUE): measured on the tuning halves of
  bench_prompt_recall.py's sets with cues written by models that never saw a question
  (bench/README.md, "Cue vectors"), the bar where unrelated prompts stayed silent;
- the note is not about a neighbour of what is asked (asked_for.py), as in the gate;
- the prompt names nothing this memory has never seen (Candidate.stranger), as on the
  semantic path.

It gives one answer, the note with the closest cue. A note without cues has no say here.
Standard library only."""

from __future__ import annotations

from . import asked_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..core.types import Fragment
    from .prompt_evidence import Candidate

MIN_CUE = 0.65  # the closest cue phrase's cosine with the prompt


def answer(found: Sequence[Candidate], min_cue: float = MIN_CUE, strangers: bool = False,
           asked: bool = True) -> list[Fragment]:
    """[the candidate whose closest cue is closest to the prompt] when that cue is close
    enough, else []. `strangers` and `asked` are for the benchmark's variants."""
    fit = [c for c in found if c.cue >= min_cue and (strangers or not c.stranger)
           and not (asked and asked_for.misses(c.asked, c.terms, c.term_rows, c.held_branch))]
    return [max(fit, key=lambda c: c.cue).fragment] if fit else []
