"""Words of a query: the keyword terms Lore searches for and the FTS5 expression built from
them. Its own small module (re only) because the per-prompt hook needs it without the vector
index."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_][\w'.\-]*[^\W_]|[^\W_]", re.UNICODE)
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves know tell remember
recall anything something did does ever
""".split())
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def keyword_terms(text: str) -> list[str]:
    terms, seen = [], set()
    for raw in _WORD.findall(text.translate(_APOSTROPHES)):
        word = raw.strip("'.-").lower()
        if word.endswith("'s"):
            word = word[:-2]  # "John's" is about John; FTS5 would look for the phrase "john s"
        if not word or word in STOPWORDS or word in seen:
            continue
        seen.add(word)
        terms.append(word)
    return terms[:32]


def fts_expression(text: str) -> str | None:
    """An OR of quoted terms. Quoting keeps identifiers like ERR_7731 or v2.1 as phrases and
    makes any user text safe to hand to MATCH."""
    terms = keyword_terms(text)
    return quoted_or(terms) if terms else None


def quoted_or(terms: list[str]) -> str:
    """Terms as an FTS5 OR of quoted phrases (a quote inside a term doubled)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


_SUFFIXES = ("ing", "ed", "es", "s")


def stem(word: str) -> str:
    """A crude stem, so that 'deploys' meets 'deploy' (FTS5's porter stemmer matches them)."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def held_terms(terms: list[str], text: str) -> int:
    """How many of `terms` (keyword_terms of something) occur in `text`, stems compared."""
    present = {stem(t) for t in keyword_terms(text)}
    return sum(1 for t in terms if stem(t) in present)


def numbers_in(text: str) -> set[str]:
    """Terms holding a digit: times, versions, amounts, error codes. Two texts that differ in
    them say different things however close their embeddings are."""
    return {t for t in keyword_terms(text) if any(c.isdigit() for c in t)}
