"""The memory model's pure math: decay, strength, reinforcement, spreading, fusion, forgetting."""

import math

from lore_plugin.core import relevance as rel

DAY = rel.DAY
NOW = 1_750_000_000.0


def score(importance: float = 0.5, accesses: int = 0, days: float = 0.0, rate: float | None = None) -> float:
    rate = rel.decay_rate_for(importance) if rate is None else rate
    return rel.relevance(importance, accesses, rate, NOW - days * DAY, NOW)


def test_a_fresh_fragment_scores_importance_times_strength_plus_the_floor():
    assert math.isclose(score(0.5), 0.5 * 1.0 + 0.5 * 0.3)


def test_relevance_decays_monotonically_over_simulated_months_towards_the_floor():
    values = [score(0.5, days=d) for d in range(0, 181, 30)]
    assert all(a > b for a, b in zip(values, values[1:]))
    assert values[-1] > 0.5 * rel.FLOOR_FACTOR
    assert math.isclose(score(0.5, days=10_000), 0.5 * rel.FLOOR_FACTOR, rel_tol=1e-6)


def test_important_knowledge_decays_more_slowly():
    rates = [rel.decay_rate_for(rel.IMPORTANCE[level]) for level in ("high", "medium", "low")]
    assert rates[0] < rates[1] < rates[2]
    assert math.isclose(rates[0], rel.DECAY_BY_LEVEL["high"])
    high_kept = score(0.9, days=60) / score(0.9)
    low_kept = score(0.2, days=60) / score(0.2)
    assert high_kept > low_kept


def test_strength_grows_logarithmically_with_access_count():
    gains = [rel.strength(n + 1) - rel.strength(n) for n in range(10)]
    assert all(g > 0 for g in gains)
    assert all(a > b for a, b in zip(gains, gains[1:]))


def test_reinforcement_resets_the_clock_and_counts_an_access():
    state = rel.MemoryState(access_count=2, decay_rate=0.03, last_accessed=NOW - 9 * DAY,
                            last_reinforced=NOW - 9 * DAY)
    after = rel.reinforce(state, NOW)
    assert after.access_count == 3 and after.last_reinforced == NOW == after.last_accessed
    before = rel.relevance(0.5, 2, 0.03, state.last_reinforced, NOW)
    assert rel.relevance(0.5, 3, after.decay_rate, after.last_reinforced, NOW) > before


def test_spaced_recalls_slow_decay_more_than_massed_recalls():
    start = rel.MemoryState(0, 0.05, NOW, NOW)
    massed = start
    for i in range(4):
        massed = rel.reinforce(massed, NOW + i * 60)
    spaced = start
    for i in range(4):
        spaced = rel.reinforce(spaced, NOW + (i + 1) * 7 * DAY)
    assert massed.access_count == spaced.access_count == 4
    assert spaced.decay_rate < massed.decay_rate


def test_spreading_activation_is_weaker_than_direct_recall_and_scales_with_weight():
    state = rel.MemoryState(1, 0.03, NOW - 20 * DAY, NOW - 20 * DAY)
    direct = rel.reinforce(state, NOW)
    strong = rel.spread(state, 1.0, NOW)
    weak = rel.spread(state, 0.2, NOW)
    assert strong.access_count == state.access_count  # not an access
    assert state.last_reinforced < weak.last_reinforced < strong.last_reinforced < direct.last_reinforced


def test_blend_lets_match_dominate_and_relevance_break_ties():
    assert rel.blend(1.0, 0.1) > rel.blend(0.6, 1.5)
    assert rel.blend(0.8, 1.2) > rel.blend(0.8, 0.2)


def test_forgetting_follows_both_tiers_exactly():
    old61, old91, young = NOW - 61 * DAY, NOW - 91 * DAY, NOW - 59 * DAY
    assert rel.forgettable(0.019, 0, old61, NOW)  # tier 1: weak, never used, > 60 days
    assert not rel.forgettable(0.019, 1, old61, NOW)  # used once: tier 1 spares it
    assert not rel.forgettable(0.019, 0, young, NOW)  # too young
    assert not rel.forgettable(0.021, 0, old61, NOW)  # above the threshold
    assert rel.forgettable(0.009, 5, old91, NOW)  # tier 2: very weak, > 90 days, even if used
    assert not rel.forgettable(0.009, 5, old61, NOW)
    assert not rel.forgettable(0.011, 5, old91, NOW)
