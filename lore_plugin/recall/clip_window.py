"""A long line clipped around the prompt's words rather than at its start (issue 30).

The per-prompt injection has 600 characters for up to three answers, so a long answer is
clipped. Clipped at its start, a chat turn keeps its greeting and loses the sentence the
prompt asked about; clipped around the part holding most of the prompt's words, it keeps
that sentence. A cut is marked with "…" at each end that lost text. Standard library only."""

from __future__ import annotations

import re

from .terms import keyword_terms, stem

ELLIPSIS = "…"
_WORD = re.compile(r"\S+")


def around(text: str, limit: int, terms: list[str]) -> str:
    """`text` (whitespace collapsed) in at most `limit` characters: whole when it fits, else
    a window starting at a word that holds the most distinct `terms` (stems compared), the
    middle of such windows; the start when it holds none. "…" where text was left out."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    wanted = {stem(t) for t in terms}
    words = [(m.start(), m.end(), _stems(m.group()) & wanted) for m in _WORD.finditer(text)]
    best: list[int] = []  # the starts of the windows holding the most terms
    best_held = -1
    count: dict[str, int] = {}  # the wanted stems in the window words[i:j], with repeats
    j = 0
    for i, (start, _, _) in enumerate(words):
        room = limit - (1 if start == 0 else 2)  # the window's ellipses take their place
        while j < len(words) and words[j][1] - start <= room:
            for s in words[j][2]:
                count[s] = count.get(s, 0) + 1
            j += 1
        if len(count) > best_held:
            best, best_held = [], len(count)
        if len(count) == best_held:
            best.append(start)
        for s in words[i][2] if i < j else ():
            count[s] -= 1
            if not count[s]:
                del count[s]
        j = max(j, i + 1)
    # Of the windows holding the most, the middle one: the words the prompt asked by sit
    # mid-window, with what the line says before and after them (an answer often follows).
    best_start = 0 if best_held == 0 else best[(len(best) - 1) // 2]
    lead = "" if best_start == 0 else ELLIPSIS
    rest = text[best_start:]
    if len(lead) + len(rest) <= limit:  # the window reaches the end: nothing cut there
        return lead + rest
    return lead + rest[:limit - len(lead) - 1].rstrip() + ELLIPSIS


def _stems(word: str) -> set[str]:
    return {stem(t) for t in keyword_terms(word)}
