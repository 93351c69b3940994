"""The benchmark's precision "by meaning" (bench/graded_precision.py, issue 30): an injected turn
that LoCoMo does not label but a grader found to hold the answer counts; one without a verdict
counts as not answering and is handed back to be graded; a reader's picks are read by their
place in what the reader was shown. Real memory, real model, the committed verdicts file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from lore_plugin.recall import prompt_judge, prompt_recall
from lore_plugin.recall.memory import Memory
from tests.conftest import bench_modules
from tests.recall.test_prompt_answer_shown import conversation

QUESTION = "What did Melanie realize after the charity race?"
GOLD = "Melanie: after the charity race I realized self-care is important."
ALSO = "Melanie: since that race I take time for myself, self-care matters."
OTHER = "Melanie: the charity race raised money for mental health."
KIDS = "Melanie: my kids cheered for me at the charity race."


def graded_module():
    """bench/graded_precision.py, with the bench modules it imports."""
    return bench_modules("prompt_cases", "answer_shown", "graded_precision")


def case_of(gp, memory: Memory):
    ids = conversation(memory, {"20 January 2023": [GOLD, OTHER],
                                "22 January 2023": [ALSO, KIDS]})
    found = prompt_recall.gather(memory, QUESTION, set())
    assert found is not None and set(ids.values()) <= {c.fragment.id for c in found}
    case = gp.pc.Case("locomo", QUESTION, True, "held-out", frozenset({ids[GOLD]}), found, [],
                      {})
    return case, ids


def test_a_turn_graded_as_holding_the_answer_counts_by_meaning_and_an_ungraded_one_is_handed_back(
        memory: Memory):
    gp = graded_module()
    case, ids = case_of(gp, memory)
    asked = gp.pid(case)
    graded = {gp.key(QUESTION, ALSO): True, gp.key(QUESTION, OTHER): False}

    counts, missing = gp.score([case], {asked: [ids[ALSO]]}, graded)
    assert (counts["held-out"]["by ids"], counts["held-out"]["by meaning"]) == (0, 1)
    assert missing == []

    counts, _ = gp.score([case], {asked: [ids[OTHER]]}, graded)
    assert (counts["held-out"]["by ids"], counts["held-out"]["by meaning"]) == (0, 0)

    counts, _ = gp.score([case], {asked: [ids[GOLD], ids[OTHER]]}, {})
    assert (counts["held-out"]["by ids"], counts["held-out"]["by meaning"]) == (1, 1)

    counts, missing = gp.score([case], {asked: [ids[ALSO]]}, {})
    assert counts["held-out"]["by meaning"] == 0  # without a verdict: not answering
    assert [(m["question"], m["turn"], m["id"]) for m in missing] == \
        [(QUESTION, ALSO, hashlib.sha1(f"{QUESTION}\0{ALSO}".encode()).hexdigest()[:12])]

    counts, _ = gp.score([case], {asked: []}, graded)
    assert counts["held-out"]["injected"] == 0 and counts["held-out"]["related"] == 1


def test_a_readers_picks_are_the_candidates_at_the_places_it_was_shown(memory: Memory,
                                                                     tmp_path: Path):
    gp = graded_module()
    case, _ = case_of(gp, memory)
    shown = gp.shown_to_reader(case)
    likeliest = sorted(prompt_judge.answered(case.found),
                       key=lambda c: -prompt_judge.probability(c))
    assert shown == [c.fragment.id for c in likeliest][:gp.READER_TOP]
    assert len(shown) >= 4
    (tmp_path / "out-0.json").write_text(json.dumps({gp.pid(case): [2, 99, 1, 2, 3, 4]}))
    picks = gp.reader_picks([case], tmp_path)
    # At most MOST, by the place shown; a place past the list, or given again, is dropped.
    assert prompt_judge.MOST == 3
    assert picks == {gp.pid(case): [shown[1], shown[0], shown[2]]}


def test_the_committed_verdicts_are_keyed_by_their_question_and_turn():
    gp = graded_module()
    data = json.loads(gp.GRADED.read_text())
    assert len(data["verdicts"]) > 1000
    for k, v in data["verdicts"].items():
        assert k == gp.key(v["question"], v["turn"])
        assert isinstance(v["holds_answer"], bool)
