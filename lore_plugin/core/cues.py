"""Cues: the few short phrases someone might later ask for a note by, written beside it by
whoever stores it (the extraction model, or the agent calling store_memory). A note says
"To run atlas locally use `make dev` ..."; it is asked for as "how do I get the backend
running on my machine?". The note's words and MiniLM rate that question far from it; a cue
"start backend on my machine" holds its words.

Cues are searched, never shown: the keyword index and the per-prompt hook's keyword
coverage read them as the note's words (bench/README.md "Cues beside each note": measured
on two sets whose questions their writers never saw), while the text recalled and
injected stays the note's own. They are kept as one string, a phrase a line, so that the
stores index them like any text column.

This module only normalises what a writer gave: the store redacts it like the note's text."""

from __future__ import annotations

from collections.abc import Iterable

MAX_CUES = 8  # phrases kept per note: more is a paragraph, not a handful of ways to ask
CUE_CHARS = 80  # characters kept per phrase
CUES_CHARS = MAX_CUES * (CUE_CHARS + 1)  # the longest normalised string
# Metadata key: when consolidation asked the model for a note's cues and got none
# (consolidation/cue_writing.py), so that the note is not asked again every cycle. The stores'
# due reads match it as text ('"cues_asked_at"' in the metadata JSON).
CUES_ASKED_AT = "cues_asked_at"


def clean_cues(given: Iterable[object] | str | None) -> str:
    """The cues as stored: each phrase on one line, whitespace collapsed, at most CUE_CHARS
    characters, blanks and repeats (ignoring case) dropped, at most MAX_CUES of them. A
    string is taken as phrases one per line; anything else that is not text is dropped."""
    if given is None:
        return ""
    items = given.splitlines() if isinstance(given, str) else given
    kept: list[str] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            continue
        phrase = " ".join(item.split())[:CUE_CHARS].strip()
        if phrase and phrase.lower() not in seen:
            seen.add(phrase.lower())
            kept.append(phrase)
        if len(kept) == MAX_CUES:
            break
    return "\n".join(kept)


def cue_list(stored: str | None) -> list[str]:
    """The phrases of a stored cues string."""
    return [line for line in (stored or "").splitlines() if line]


def join_cues(held: str | None, more: str | None) -> str:
    """A note's cues with another's joined on (a repeat stored in other words, a merge): the
    held ones first, then the new, within clean_cues's bounds."""
    return clean_cues(cue_list(held) + cue_list(more))


def unjoin_cues(joined: str | None, held: str | None, other: str | None) -> str:
    """join_cues(held, other) taken back (an undone merge): the phrases of `joined` that
    were `held`'s, or that did not come from `other` (given since), in their order."""
    mine = {c.lower() for c in cue_list(held)}
    theirs = {c.lower() for c in cue_list(other)}
    return clean_cues([c for c in cue_list(joined) if c.lower() in mine or c.lower() not in theirs])
