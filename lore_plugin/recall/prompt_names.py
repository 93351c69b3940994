"""A prompt that is little more than names (issue 30): "Sarah Chen work", "David Kim
collaboration". Its answers are the notes that hold those names.

prompt_judge's gate wants the meaning and the words to agree, and here the meaning cannot:
MiniLM rates a long note that mentions Sarah Chen among much else 0.05-0.17 against two
names and a word, so the evidence stays under the bar while the note holds every rare word
the prompt has. Rare is what decides it: a word that only a few notes of this memory hold
points at those notes, whatever the cosine says. So, when nothing else passes, this path
answers when
- every word of the prompt is rare here (at most FEW rows hold it, and at most FEW_SHARE of
  them in a small memory), but for at most COMMON others, common or held by no note ("work"
  in "Sarah Chen work", "collaboration" in "David Kim collaboration": the question's own
  word); a question in other words than its note holds several words no note holds, and
  two rare ones by chance, and is not a prompt of names;
- it has at least MIN_RARE rare words: one alone is a subject, not a name;
- a name no note holds (Candidate.stranger) says the prompt is about someone this memory
  never met;
- the notes whose own text holds every one of the rare words are its answers, in search's
  order, at most MOST; but a prompt with fewer than COMMON other words may leave the rest of
  that allowance out of the note: a word few notes hold can still be the question's own
  ("work" where only three notes say it). The branch above a note does not count: a
  heading holds its words for every note below it, and counting it gave a question in
  other words ("labels from people disagree") a wrong note, the office fridge's labels.

FEW, COMMON, MIN_RARE and the spare word were chosen on the tuning halves of
bench_prompt_recall.py's sets; the figures are in bench/README.md. Standard library only."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..core.types import Fragment
    from .prompt_evidence import Candidate

FEW = 5  # a word held by at most this many rows is rare here ...
FEW_SHARE = 0.25  # ... and by at most this share of them (a new user's dozen notes)
COMMON = 1  # the prompt's other words (common, or held by no note) besides its rare ones
MIN_RARE = 2  # rare words the prompt must have: one alone is a subject, not a name


def rare_terms(c: Candidate, few: int = FEW) -> tuple[list[int], int]:
    """The places, among the prompt's terms, of those that few rows hold, and how many others
    it has (common here, or held by no note)."""
    few = min(few, int(c.rows * FEW_SHARE))
    rare = [i for i, n in enumerate(c.term_rows) if 1 <= n <= few]
    return rare, len(c.term_rows) - len(rare)


def answer(found: Sequence[Candidate], most: int, few: int = FEW, common: int = COMMON,
           min_rare: int = MIN_RARE, spare: bool = True) -> list[Fragment]:
    """The notes holding the rare words of a prompt made of names, in search's order (at
    most `most`); [] when the prompt is not such a prompt or no note holds them. `spare`:
    a prompt with fewer than `common` other words may leave that many of its rare words out
    of a note (a word few notes hold can still be the question's own, "work" in a memory
    whose notes say "worked")."""
    if not found or found[0].stranger:
        return []
    rare, others = rare_terms(found[0], few)
    if others > common or len(rare) < min_rare:
        return []
    need = max(min_rare, len(rare) - (common - others if spare else 0))
    out: dict[str, Fragment] = {}
    for c in found:
        if len(c.held) == len(c.term_rows) and sum(c.held[i] for i in rare) >= need:
            out.setdefault(c.fragment.id, c.fragment)
    return list(out.values())[:most]
