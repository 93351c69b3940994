"""Retrieval quality through the real engine and the real model, on public benchmark data
(bench/bench_recall.py has the full runs), and the time-expression parser it relies on."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lore_plugin.core import timeparse
from tests.conftest import ROOT, bench_recall

# The peer corpus and LoCoMo's first conversation, copied into the repo so CI never skips.
DATA = Path(os.environ.get("LORE_BENCH_DATA", ROOT / "tests" / "fixtures" / "bench-data"))


def _data(name: str) -> Path:
    path = DATA / name
    assert path.exists(), f"{path} is missing (set LORE_BENCH_DATA to the folder that holds it)"
    return path


def _recall_at_5(bench, corpus, embedder, folder: Path, modes: list[str]) -> dict[str, float]:
    cache = bench.CachedEmbedder(embedder, folder / "embeddings.sqlite")
    db, ids = bench.build_database(corpus, folder, cache)
    results: dict = {}
    bench.evaluate(corpus, db, ids, embedder, modes, results)
    summary = bench.summarise(results)
    return {mode: summary[mode]["overall"]["R@5"] for mode in modes}


def test_the_peer_corpus_is_recalled_at_five_at_least_nine_times_in_ten(embedder, tmp_path):
    bench = bench_recall()
    corpus = bench.load_peer(_data("claude-memory-corpus.json"))
    got = _recall_at_5(bench, corpus, embedder, tmp_path, ["hybrid"])
    assert got["hybrid"] >= 0.90, got  # the peer publishes 0.680


def test_no_peer_category_falls_below_the_better_single_signal(embedder, tmp_path):
    """Issue 16: in every category, both Lore modes within 0.02 of BM25 or MiniLM alone,
    whichever is better there. "general" used to miss: a restaurant-performance note that
    shares only "performance" with "Spark performance optimization" took a Spark note's place."""
    bench = bench_recall()
    corpus = bench.load_peer(_data("claude-memory-corpus.json"))
    cache = bench.CachedEmbedder(embedder, tmp_path / "embeddings.sqlite")
    db, ids = bench.build_database(corpus, tmp_path, cache)
    results: dict = {}
    bench.evaluate(corpus, db, ids, embedder, ["hybrid", "query", "keyword", "vector"], results)
    assert bench.shortfalls("peer", bench.summarise(results)) == []


def test_on_a_locomo_conversation_hybrid_beats_bm25_and_minilm_alone(embedder, tmp_path):
    bench = bench_recall()
    corpus = bench.load_locomo(_data("locomo10.json"), limit=1)[0]
    got = _recall_at_5(bench, corpus, embedder, tmp_path, ["hybrid", "keyword", "vector"])
    assert got["hybrid"] > got["keyword"] and got["hybrid"] > got["vector"], got


# -- time expressions -------------------------------------------------------------------
NOW = datetime(2025, 4, 26, 15, 0, tzinfo=UTC).timestamp()  # a Saturday


def days(text: str) -> tuple[str, str] | None:
    window = timeparse.parse(text, NOW, UTC)
    if window is None:
        return None
    fmt = "%Y-%m-%d"
    return (datetime.fromtimestamp(window.start, UTC).strftime(fmt),
            datetime.fromtimestamp(window.end - 1, UTC).strftime(fmt))


@pytest.mark.parametrize("text, expected", [
    ("what happened on 2025-01-10", ("2025-01-10", "2025-01-10")),
    ("deploys on 2025/03/04", ("2025-03-04", "2025-03-04")),
    ("What did Jon find on 1 February, 2023?", ("2023-02-01", "2023-02-01")),
    ("the picture shared on December 1,2023", ("2023-12-01", "2023-12-01")),
    ("what did we ship on March 3rd", ("2025-03-03", "2025-03-03")),
    ("what happened in February 2025", ("2025-02-01", "2025-02-28")),
    ("notes from 2024-02", ("2024-02-01", "2024-02-29")),
    ("what did we work on in early January 2025", ("2025-01-01", "2025-01-10")),
    ("classes Evan joined in mid-August 2023", ("2023-08-11", "2023-08-20")),
    ("late April 2025 work", ("2025-04-21", "2025-04-30")),
    ("activities in the first week of April 2025", ("2025-04-01", "2025-04-07")),
    ("the first weekend of October 2023", ("2023-10-07", "2023-10-08")),
    ("roadmap for Q1 2025", ("2025-01-01", "2025-03-31")),
    ("what changed in 2022", ("2022-01-01", "2022-12-31")),
])
def test_absolute_dates_months_and_parts_of_months_become_windows(text, expected):
    assert days(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("the Spark issues in January", ("2025-01-01", "2025-01-31")),  # this year: not yet over
    ("the painting Evan shared in October", ("2024-10-01", "2024-10-31")),  # last year's
    ("what broke yesterday", ("2025-04-25", "2025-04-25")),
    ("today's standup", ("2025-04-26", "2025-04-26")),
    ("what did we decide last week", ("2025-04-14", "2025-04-20")),
    ("this month", ("2025-04-01", "2025-04-26")),
    ("last month's incidents", ("2025-03-01", "2025-03-31")),
    ("last year", ("2024-01-01", "2024-12-31")),
    ("what did I do 3 days ago", ("2025-04-23", "2025-04-23")),
    ("bugs fixed in the past 2 weeks", ("2025-04-12", "2025-04-26")),
    ("what did we discuss last Friday", ("2025-04-25", "2025-04-25")),
])
def test_periods_relative_to_now_resolve_against_the_clock(text, expected):
    assert days(text) == expected


@pytest.mark.parametrize("text", [
    "ERR_2023 in v2.1.2023", "Python 3.11 release notes", "port 2020 refused",
    "who may help with the migration", "2025-13-40 is not a date", "how does hybrid search work",
    "When did Caroline go to the support group?",
])
def test_text_without_a_time_gives_no_window(text):
    assert timeparse.parse(text, NOW, UTC) is None


def test_since_and_before_open_the_window_on_one_side():
    assert days("what changed since March") == ("2025-03-01", "2025-04-26")
    assert days("decisions before 2024")[1] == "2023-12-31"


def test_the_span_covers_the_expression_and_its_modifier():
    text = "work around 2025-02-10 on search"
    window = timeparse.parse(text, NOW, UTC)
    assert window is not None and text[slice(*window.span)] == "around 2025-02-10"


def test_the_weight_is_one_inside_and_fades_with_the_days_outside():
    window = timeparse.parse("on 2025-01-10", NOW, UTC)
    assert window is not None
    inside = datetime(2025, 1, 10, 18, tzinfo=UTC).timestamp()
    next_midnight = datetime(2025, 1, 11, tzinfo=UTC).timestamp()
    far = datetime(2025, 1, 20, tzinfo=UTC).timestamp()
    assert window.weight(inside) == 1.0
    assert 0 < window.weight(far) < window.weight(next_midnight) < 1.0


def test_around_widens_how_far_a_window_reaches():
    plain = timeparse.parse("on 2025-02-10", NOW, UTC)
    around = timeparse.parse("around 2025-02-10", NOW, UTC)
    assert plain is not None and around is not None
    two_days_later = datetime(2025, 2, 12, 12, tzinfo=UTC).timestamp()
    assert around.weight(two_days_later) > plain.weight(two_days_later)


# -- time-aware recall in the engine ---------------------------------------------------
def test_a_query_naming_a_month_prefers_what_was_stored_then(memory, clock):
    topic = memory.store("Deploy pipeline", "Deploy pipeline", depth=0).id
    facts = {}
    for month, text in [(1, "Switched the deploy pipeline to blue-green releases."),
                        (2, "Added a canary stage to the deploy pipeline."),
                        (3, "Deploy pipeline now runs database migrations first.")]:
        clock.now = datetime(2025, month, 12, tzinfo=UTC).timestamp()
        facts[month] = memory.store(text, text, parent_id=topic, depth=1).id
    clock.now = datetime(2025, 4, 26, tzinfo=UTC).timestamp()
    memory.tz = UTC
    got = memory.search("deploy pipeline changes in February 2025", limit=3, depth=1).fragments
    assert got[0].fragment.id == facts[2]
    undated = memory.search("deploy pipeline changes", limit=3, depth=1).fragments
    assert len(undated) == 3


_PIECES = ["in", "on", "since", "before", "around", "early", "late", "mid-", "first week of",
           "May", "march", "Dec", "2025", "9999-12-31", "0001-01-01", "31", "3rd", "Q4",
           "last", "week", "ago", "999999999 days ago", "yesterday", "Friday", ",", "-", "/"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=6)), max_size=8))
def test_any_text_parses_to_nothing_or_a_proper_window(pieces):
    window = timeparse.parse(" ".join(pieces), NOW, UTC)
    assert window is None or (window.start < window.end and window.fuzz > 0)
