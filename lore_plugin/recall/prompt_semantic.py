"""A prompt worded differently from the note that answers it (issue 30): the answer on its
meaning alone, when the meaning is unmistakable.

prompt_judge's gate wants a candidate that holds some of the prompt's rare words. A question
put in other words ("switching back quickly when a version misbehaves" for "Rollback is one
command: argocd app rollback…") holds none, and is silenced however clearly its note stands
out. MiniLM's cosine alone cannot tell such a question from small talk about someone else's
life (both reach 0.4–0.5), so this path speaks only when four things agree:

- the closest candidate is close (MIN_COSINE);
- it stands clear of the rest (MIN_LEAD over the mean cosine of the next LEAD_OVER): a
  paraphrase points at one note, while a prompt the memory cannot answer sits among many
  notes of the same kind (a day of chat, a dozen notes on one project) at about one distance;
- its own text holds none of the prompt's rare words (Candidate.own == 0): a note that shares
  a word or two with the prompt, too few for the gate, owes part of its cosine to that word
  (MiniLM rates surface overlap), and is the near miss ("the kitchen table broke" for "an
  upstream table changed its columns"), not the paraphrase;
- the prompt names nothing this memory has never seen (Candidate.stranger): a question about
  a person, a product or a place the notes never mention is about something else, however
  close its meaning.

It gives one answer, the closest: its neighbours are more likely wrong than right. MIN_COSINE
and MIN_LEAD were chosen on the tuning halves of bench_prompt_recall.py's sets (LEAD_OVER was
set beforehand, not tuned); the figures are in bench/README.md. Standard library only."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..core.types import Fragment
    from .prompt_evidence import Candidate

MIN_COSINE = 0.40  # the closest candidate's cosine with the prompt
MIN_LEAD = 0.10  # ... above the mean of the next LEAD_OVER candidates' cosines
LEAD_OVER = 5


def closest(found: Sequence[Candidate]) -> tuple[Candidate, float] | None:
    """The candidate closest to the prompt by meaning and its lead over the next ones (each
    note counted once: a note can be found both by search and by the descent)."""
    best: dict[str, Candidate] = {}
    for c in found:
        if c.fragment.id not in best or c.cosine > best[c.fragment.id].cosine:
            best[c.fragment.id] = c
    ranked = sorted(best.values(), key=lambda c: -c.cosine)
    if not ranked:
        return None
    rest = [c.cosine for c in ranked[1:1 + LEAD_OVER]]
    # A lone note stands clear of nothing: no lead, so no answer on meaning alone.
    return ranked[0], ranked[0].cosine - sum(rest) / len(rest) if rest else 0.0


def answer(found: Sequence[Candidate], min_cosine: float = MIN_COSINE,
           min_lead: float = MIN_LEAD, max_own: float = 0.0, strangers: bool = False,
           replies: bool = True) -> list[Fragment]:
    """[the closest candidate] when its meaning alone is unmistakable, else []. `max_own` and
    `strangers` are for the benchmark's variants: the share of the prompt's words the note
    may hold, and whether a prompt naming what no note holds may be answered."""
    top = closest(found)
    if top is None:
        return []
    c, lead = top
    if c.cosine < min_cosine or lead < min_lead or c.own > max_own \
            or (c.stranger and not strangers):
        return []
    reply = next((r for r in found if r.follows == c.fragment.id), None) if replies else None
    return [(reply or c).fragment]
