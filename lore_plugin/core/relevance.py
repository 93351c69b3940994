"""The memory model as pure functions: Ebbinghaus decay, reinforcement, spreading activation
and the blend of match and relevance. Every function takes `now` (unix seconds) instead of reading a clock."""

from __future__ import annotations

import math
from dataclasses import dataclass

DAY = 86400.0

# Design §4: importance levels, and more important knowledge decays more slowly.
IMPORTANCE = {"high": 0.9, "medium": 0.5, "low": 0.2}
DECAY_BY_LEVEL = {"high": 0.01, "medium": 0.03, "low": 0.07}  # per day

FLOOR_FACTOR = 0.3  # the "+ importance * 0.3" term: important knowledge never fades to zero
SPACING_DAYS = 7.0  # a gap this long earns the full spacing bonus
SPACING_BONUS = 0.25  # at most a quarter of the decay rate is shed per well-spaced recall
MIN_DECAY = 0.002
SPREAD_FACTOR = 0.5  # neighbours get at most half of a direct recall's refresh


def importance_value(level: str) -> float:
    return IMPORTANCE.get(level, IMPORTANCE["medium"])


def decay_rate_for(importance: float) -> float:
    """Interpolates the per-level table, so any importance in [0, 1] gets a rate."""
    importance = min(max(importance, 0.0), 1.0)
    if importance >= IMPORTANCE["medium"]:
        span = (importance - 0.5) / 0.4
        return DECAY_BY_LEVEL["medium"] + span * (DECAY_BY_LEVEL["high"] - DECAY_BY_LEVEL["medium"])
    span = (importance - 0.2) / 0.3
    return DECAY_BY_LEVEL["low"] + span * (DECAY_BY_LEVEL["medium"] - DECAY_BY_LEVEL["low"])


def strength(access_count: int) -> float:
    """Strength grows with the logarithm of use: the tenth recall adds less than the second."""
    return 1.0 + math.log1p(max(access_count, 0))


def relevance(
    importance: float, access_count: int, decay_rate: float, last_reinforced: float, now: float
) -> float:
    days = max(now - last_reinforced, 0.0) / DAY
    decayed = importance * strength(access_count) * math.exp(-decay_rate * days)
    return decayed + importance * FLOOR_FACTOR


@dataclass(frozen=True)
class MemoryState:
    """The fields of a fragment that recall changes."""

    access_count: int
    decay_rate: float
    last_accessed: float
    last_reinforced: float


def reinforce(state: MemoryState, now: float) -> MemoryState:
    """A direct recall. Spacing effect: a recall after a long gap slows future decay more
    than a burst of recalls in quick succession."""
    gap_days = max(now - state.last_reinforced, 0.0) / DAY
    spacing = min(gap_days / SPACING_DAYS, 1.0)
    rate = max(state.decay_rate * (1.0 - SPACING_BONUS * spacing), MIN_DECAY)
    return MemoryState(state.access_count + 1, rate, now, now)


def spread(state: MemoryState, weight: float, now: float) -> MemoryState:
    """Spreading activation to a neighbour: moves its reinforcement clock part of the way
    towards now, in proportion to the edge weight. It does not count as an access."""
    share = SPREAD_FACTOR * min(max(weight, 0.0), 1.0)
    moved = state.last_reinforced + share * max(now - state.last_reinforced, 0.0)
    return MemoryState(state.access_count, state.decay_rate, state.last_accessed, moved)


# Implicit usefulness (issue 17): what the assistant did with what recall returned it.
IGNORE_GRACE = 2  # ignored recalls in a row that cost nothing: a note can be right but unneeded
IGNORED_DECAY = 1.3  # past the grace, each ignored recall speeds decay by this factor ...
MAX_DECAY = 0.2  # ... up to this rate per day (relevance halves in under four days)


def credit_use(state: MemoryState, now: float) -> MemoryState:
    """A recalled fragment the assistant then used: a second reinforcement on top of the
    recall's own, so that what helps outlasts what merely matched."""
    return reinforce(state, now)


def penalise_ignored(state: MemoryState, ignored_streak: int, counted: bool = True
                     ) -> MemoryState:
    """A fragment recall keeps returning and the assistant keeps ignoring: past the grace,
    decay speeds up and the recall's access, if it `counted` one (tool answers do, the
    prompt hook's injection does not), is taken back, so it loses relevance over time and
    stops crowding out better matches."""
    if ignored_streak <= IGNORE_GRACE:
        return state
    rate = min(state.decay_rate * IGNORED_DECAY, max(MAX_DECAY, state.decay_rate))
    return MemoryState(max(state.access_count - int(counted), 0), rate, state.last_accessed,
                       state.last_reinforced)


def blend(match: float, relevance_score: float, relevance_weight: float = 0.15) -> float:
    """Match quality dominates; relevance (0..~1.5) breaks ties and lifts what is used."""
    return match * (1.0 - relevance_weight + relevance_weight * min(relevance_score, 1.5) / 1.5)


def forgettable(
    relevance_score: float, access_count: int, created_at: float, now: float
) -> bool:
    """The two forgetting tiers of design §4."""
    age_days = (now - created_at) / DAY
    if relevance_score < 0.02 and access_count == 0 and age_days > 60:
        return True
    return relevance_score < 0.01 and age_days > 90
