"""Whether a prompt gets remembered knowledge, and which (issue 30): the answer when the
evidence agrees, silence otherwise.

Whether: the evidence for one candidate answer is its cosine with the prompt plus a share of
its keyword coverage (prompt_evidence.py: how much of the prompt's rare words it and the
branch above it hold). Neither alone is enough: MiniLM rates everyday small talk about
someone else's life close to a question about this one (cosine ≈ 0.5), and a line can hold a
prompt's common words while saying something else. When both agree, the answer is there; a
neighbour of the answer, or a note on the same subject, has the meaning but not the prompt's
particular words, and stays below the bar.

- An answer must hold some of the prompt's rare words (MIN_AGREEMENT of their IDF mass): a
  neighbour on the same subject ("when do deploys get rolled back?" against the deploy
  window) has the meaning, by MiniLM, but not the words that ask for something else.
- A prompt gets anything only when its best answer's evidence reaches MIN_EVIDENCE.
- An answer must be about what is asked, not its neighbour (asked_for.py): "what's the
  Grafana alert threshold?" asks for a threshold, which no note here holds; the note on the
  Grafana dashboard holds the modifier, "Grafana", and does not pass the gate.
- A prompt that asks about a day and names little else holds no note's words; the notes
  stored that day (Candidate.dated) are its answers when nothing else passes.
- A note that asks what the prompt asks holds its words; the note after it answers
  (prompt_replies.py). Such a reply is judged on the better of its own words and its
  question's (answered()), and the question is ordered below it.
- A prompt that is little more than names ("Sarah Chen work") holds every rare word of a
  long note whose meaning MiniLM rates far from it: when nothing passes, the notes that hold
  those words (prompt_names.py).
- A prompt worded the way someone would ask for a note is close to one of the note's cues
  (the phrases stored beside it, core/cues.py) even where its words and meaning fall short
  of the gate: when nothing passes, the note whose closest cue is close (prompt_cued.py).
- A prompt worded differently from its note holds none of its words: when nothing passes,
  the one note its meaning alone clearly points at (prompt_semantic.py), if any.
- Headings never compete: prompt_recall.candidates() has already replaced a matched topic or
  concept by its children closest to the prompt, which are judged on their own evidence.

Which: of the candidates within BAND of that bar, the MOST likeliest by a small logistic
model (FEATURES: the cosine, the coverage with the branch, the coverage by the candidate's
own text, hybrid search's place for it, and the cosine of its closest cue), likeliest first,
so that the 600 characters go to the likeliest answers: the answer to a question about
someone's winter days is the line that itself says "cold winter days", not a neighbour whose
branch names the same person; and of two turns about a support group, the one whose cue is
"when did caroline go to support group".

The first four WEIGHTS and BIAS are fitted by bench/fit_prompt_judge.py; the closest cue's
weight and the bars are chosen by bench/bench_prompt_recall.py; all on the tuning half of the
benchmark's cases only; the held-out half's figures are in bench/README.md. Standard library
only."""

from __future__ import annotations

import math
from dataclasses import replace

from . import asked_for, prompt_cued, prompt_names, prompt_semantic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..core.types import Fragment
    from .prompt_evidence import Candidate

FEATURES = ("cosine", "coverage", "own coverage", "search place", "closest cue")
# The first four fitted by `python bench/fit_prompt_judge.py --cases PKL` (L2 1.0) on the
# tuning half. The closest cue's weight was chosen afterwards with them held (the best of 0-4
# on the tuning halves' coverage), so that a memory without cue vectors (cue 0) keeps the
# order it had: refitting all five changed the four, and cost LoCoMo with cues (fitted
# pointwise) or without them (listwise; bench/README.md). Only the order is used, so the
# probability need not stay calibrated once a cue adds to it.
CUE_WEIGHT = 3.0
WEIGHTS = (2.129, 2.016, 1.353, 1.996, CUE_WEIGHT)
BIAS = -5.032
KEYWORD_WEIGHT = 0.4  # what full keyword coverage adds to a cosine, in the gate's evidence
MIN_AGREEMENT = 0.3  # the share of the prompt's IDF mass an answer's line must hold
MIN_EVIDENCE = 0.65  # the best answer's evidence a prompt needs to get anything
BAND = 0.10  # further answers: evidence at least MIN_EVIDENCE - BAND
MOST = 3  # answers per prompt


def evidence(c: Candidate, keyword_weight: float = KEYWORD_WEIGHT) -> float:
    """How strongly one candidate answers the prompt, for the gate: its meaning and its words,
    fused."""
    return c.cosine + keyword_weight * c.coverage


def features(c: Candidate) -> tuple[float, ...]:
    """One candidate's evidence, in FEATURES' order (a candidate without cue vectors: cue 0)."""
    return (c.cosine, c.coverage, c.own, 1.0 / (1 + c.rank), c.cue)


def probability(c: Candidate, weights: Sequence[float] = WEIGHTS, bias: float = BIAS
                ) -> float:
    """The model's probability that the candidate is the answer."""
    z = bias + sum(w * x for w, x in zip(weights, features(c)))
    return 1 / (1 + math.exp(-max(min(z, 30.0), -30.0)))


def misses(c: Candidate) -> bool:
    """Whether the candidate is about a neighbour of what is asked (asked_for.misses)."""
    return asked_for.misses(c.asked, c.terms, c.term_rows, c.held_branch)


def answered(found: Sequence[Candidate]) -> list[Candidate]:
    """The candidates with each reply to a question among them (Candidate.follows,
    prompt_replies.py) holding the better of its own keyword coverage and its question's,
    and of their places in search's order (search found the question for the prompt, and
    the reply with it), and each question that has its reply here ranked as a note whose own
    text holds none of the prompt's words: it asks what the prompt asks, its reply answers.
    The reply keeps its own
    cosine: taking the question's too let more unrelated prompts through (bench/README.md)."""
    by_id = {c.fragment.id: c for c in found}
    asked = {c.follows for c in found if c.follows in by_id}
    out = []
    for c in found:
        q = by_id.get(c.follows)
        if q is not None:
            c = replace(c, coverage=max(c.coverage, q.coverage), own=max(c.own, q.own),
                        rank=min(c.rank, q.rank))
        out.append(replace(c, own=0.0) if c.fragment.id in asked else c)
    return out


def judge(found: Sequence[Candidate], min_evidence: float = MIN_EVIDENCE, band: float = BAND,
          most: int = MOST, keyword_weight: float = KEYWORD_WEIGHT,
          min_agreement: float = MIN_AGREEMENT, weights: Sequence[float] = WEIGHTS,
          bias: float = BIAS, semantic: bool = True, names: bool = True, asked: bool = True,
          cued: bool = True) -> list[Fragment]:
    """The answers to inject, likeliest first; [] when the best is not strong enough.
    `asked`: a candidate about a neighbour of what is asked does not pass the gate
    (misses). `semantic`, `names` and `cued`: whether each path after the gate may answer
    (the benchmark's variants turn one off)."""
    found = answered(found)
    agree = [(evidence(c, keyword_weight), i, c) for i, c in enumerate(found)
             if c.coverage >= min_agreement and not (asked and misses(c))]
    if not agree or max(e for e, _, _ in agree) < min_evidence:
        # A prompt about a day: that day's notes, in search's order (prompt_candidates).
        day = [c.fragment for c in found if c.dated][:most]
        # A prompt made of names: the notes that hold them (prompt_names).
        named = prompt_names.answer(found, most) if names and not day else []
        # A prompt worded like one of a note's cues: that note (prompt_cued).
        by_cue = prompt_cued.answer(found) if cued and not (day or named) else []
        # A prompt in other words than its note: the note its meaning alone points at.
        return day or named or by_cue or (prompt_semantic.answer(found) if semantic else [])
    likely = sorted(((probability(c, weights, bias), i, c) for e, i, c in agree
                     if e >= min_evidence - band), key=lambda t: (-t[0], t[1]))
    return [c.fragment for _, _, c in likely[:most]]
