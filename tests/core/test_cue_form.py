"""core/cues.py: what a writer gives as cues, normalised to what the stores keep."""

from __future__ import annotations

from lore_plugin.core.cues import CUE_CHARS, MAX_CUES, clean_cues, cue_list


def test_phrases_are_collapsed_deduplicated_and_bounded():
    given = ["  start backend\non my machine ", "Start backend on my machine", "", 7, None,
             "x" * 500] + [f"way {i}" for i in range(20)]
    stored = clean_cues(given)
    phrases = cue_list(stored)
    assert phrases[0] == "start backend on my machine"  # a newline inside is a space
    assert phrases[1] == "x" * CUE_CHARS
    assert len(phrases) == MAX_CUES and "\n\n" not in stored
    assert all("\n" not in p for p in phrases)


def test_a_string_is_phrases_one_a_line_and_nothing_is_empty():
    assert cue_list(clean_cues("local setup\n\nrun server locally\n")) == [
        "local setup", "run server locally"]
    assert clean_cues(None) == clean_cues([]) == clean_cues("  ") == ""
    assert cue_list("") == []
