"""Whether a prompt gets remembered knowledge, and which (issue 30): the answer when the
evidence agrees, silence otherwise.

The evidence for one candidate answer is its cosine with the prompt plus a share of its
keyword coverage (prompt_evidence.py: how much of the prompt's rare words it and the branch
above it hold). Neither alone is enough: MiniLM rates everyday small talk about someone else's life
close to a question about this one (cosine ≈ 0.5), and a line can hold a prompt's common
words while saying something else. When both agree, the answer is there; a neighbour of the
answer, or a note on the same subject, has the meaning but not the prompt's particular
words, and stays below the bar.

- An answer must hold some of the prompt's rare words (MIN_AGREEMENT of their IDF mass): a
  neighbour on the same subject ("when do deploys get rolled back?" against the deploy
  window) has the meaning, by MiniLM, but not the words that ask for something else.
- A prompt gets anything only when its best answer's evidence reaches MIN_EVIDENCE.
- It then gets the answers whose evidence is within BAND of that bar, best first, at most
  MOST of them, so the 600 characters go to answers, not to weak neighbours.
- Headings never compete: prompt_recall.candidates() has already replaced a matched topic or
  concept by its children closest to the prompt, which are judged on their own evidence.

The constants were tuned on the tuning half of bench/bench_prompt_recall.py's cases (split by
a fixed seed) and checked on the held-out half; both are in bench/README.md."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..core.types import Fragment
    from .prompt_evidence import Candidate

KEYWORD_WEIGHT = 0.4  # what full keyword coverage adds to a cosine
MIN_AGREEMENT = 0.3  # the share of the prompt's IDF mass an answer's line must hold
MIN_EVIDENCE = 0.65  # the best answer's evidence a prompt needs to get anything
BAND = 0.10  # further answers: evidence at least MIN_EVIDENCE - BAND
MOST = 3  # answers per prompt


def evidence(c: Candidate, keyword_weight: float = KEYWORD_WEIGHT) -> float:
    """How strongly one candidate answers the prompt: its meaning and its words, fused."""
    return c.cosine + keyword_weight * c.coverage


def judge(found: list[Candidate], min_evidence: float = MIN_EVIDENCE, band: float = BAND,
          most: int = MOST, keyword_weight: float = KEYWORD_WEIGHT,
          min_agreement: float = MIN_AGREEMENT) -> list[Fragment]:
    """The answers to inject, best first; [] when the best is not strong enough."""
    ranked = sorted(((evidence(c, keyword_weight), i, c) for i, c in enumerate(found)
                     if c.coverage >= min_agreement),
                    key=lambda t: (-t[0], t[1]))  # ties keep hybrid search's order
    if not ranked or ranked[0][0] < min_evidence:
        return []
    return [c.fragment for e, _, c in ranked if e >= min_evidence - band][:most]
