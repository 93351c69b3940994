"""The per-prompt injection shows the answer, not only its id (issue 30, answershown): a path
gives way to the answers' texts when the 600 characters are short. Real memories, real
model."""

from __future__ import annotations

from lore_plugin.recall import prompt_recall
from lore_plugin.recall.memory import Memory
from tests.conftest import bench_modules


def conversation(memory: Memory, turns: dict[str, list[str]]) -> dict[str, str]:
    """A LoCoMo-like memory: one topic, a concept per session (long names, as LoCoMo's),
    the turns under them. Returns turn text -> id."""
    topic = memory.store("Everyday conversations between Jon and Gina.",
                         "Conversations between Jon and Gina", depth=0, source="user")
    ids = {}
    for session, texts in turns.items():
        concept = memory.store(f"Session of the conversations between Jon and Gina, {session}.",
                               f"{session}, Jon and Gina talking", parent_id=topic.id,
                               depth=1, source="user")
        for text in texts:
            ids[text] = memory.store(text, text, parent_id=concept.id, depth=2,
                                     source="user").id
    return ids


def test_a_path_gives_way_when_it_would_cut_an_answers_text(memory: Memory):
    """Three answers from three sessions: with a path on each, the third's text is cut; the
    paths give way (the last first) until every answer shows what it would without paths."""
    # 125 characters each: three fit in 600 with their ids and dates and one path, not three.
    texts = [(f"{who}: " + "we talked about the studio, the music and the dancers " * 3)[:125]
             for who in ("Jon", "Gina", "Jon again")]
    ids = conversation(memory, {f"{d} January 2023": [t] for d, t in zip((20, 21, 22), texts,
                                                                             strict=True)})
    frags = [memory.reader.get(ids[t]) for t in texts]
    assert all(f is not None for f in frags)
    chosen = [f for f in frags if f is not None]
    signposted, _ = prompt_recall.compose(chosen, store=memory.reader, path_yields=False)
    assert signposted is not None and texts[2] not in signposted  # a path cut the third
    text, got = prompt_recall.compose(chosen, store=memory.reader)
    assert text is not None and got == [f.id for f in chosen]
    assert all(t.strip() in text for t in texts)  # every answer whole
    assert text.count("Conversations between J") == 1  # the first path still fits, and stays
    assert len("\n".join(line for line in text.splitlines() if "- [" in line)) \
        <= prompt_recall.BUDGET


def test_paths_stay_when_the_answers_fit_with_them(memory: Memory):
    short = ["Jon: the studio opens at nine.", "Gina: I will come on Friday."]
    ids = conversation(memory, {"20 January 2023": short[:1], "21 January 2023": short[1:]})
    frags = [f for f in (memory.reader.get(ids[t]) for t in short) if f is not None]
    text, _ = prompt_recall.compose(frags, store=memory.reader)
    assert text is not None
    assert text.count("Conversations between J") == 2  # two sessions, two paths


def answer_shown_module():
    """bench/answer_shown.py, with the bench modules it imports."""
    return bench_modules("prompt_cases", "answer_shown")


def test_the_bench_counts_an_answer_shown_only_when_its_words_are_in_the_items(memory: Memory):
    """The benchmark's "answer shown" (bench/answer_shown.py) on a real memory's injection:
    the answer's words late in a long injection count (not only its first 32 terms); words
    cut by the budget, or only in the frame's notice, do not."""
    shown_rule = answer_shown_module()
    filler = "Melanie: " + " ".join(f"word{i} topic{i}" for i in range(30)) + "."
    answer_turn = "Melanie: after the charity race I realized self-care is important."
    ids = conversation(memory, {"20 January 2023": [filler, answer_turn]})
    frags = [f for f in (memory.reader.get(ids[t]) for t in (filler, answer_turn)) if f]
    case = shown_rule.pc.Case("locomo", "What did Melanie realize after the charity race?",
                              True, "tuning", frozenset({ids[answer_turn]}), [], [], {})
    text, got = prompt_recall.compose(frags, store=memory.reader)
    assert shown_rule.shown(case, text, got, "self-care is important")
    assert not shown_rule.shown(case, text, got, "she realized nothing else mattered")
    cut, cut_ids = prompt_recall.compose(frags, budget=len(filler) + 150, store=memory.reader)
    assert cut is not None and ids[answer_turn] in cut_ids and "important" not in cut
    assert not shown_rule.shown(case, cut, cut_ids, "self-care is important")
    assert not shown_rule.shown(case, cut, cut_ids, "notes from earlier sessions")  # notice
