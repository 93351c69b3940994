"""What a question asks for (issue 30): the thing a wh-question wants to know, and whether an
answer talks about that thing or only about its neighbour.

"what's the Grafana alert threshold for the atlas error rate?" asks for a threshold, and
"which AWS region is atlas production running in?" for a region. A note on the Grafana
dashboard, or on AWS Secrets Manager, shares the subject (its meaning is close, and it holds
"Grafana", "atlas", "error rate"), so the gate's evidence passes, but it says nothing about
what is asked. The words say so: the phrase asked about is a head noun ("threshold",
"region") with its modifiers ("Grafana alert", "AWS"); no note of this memory holds the
head, and the candidate holds a modifier. It is about the modifier's subject, not the thing
asked (misses()), and prompt_judge does not let it pass the gate.

Only that case: a head no note holds is not enough on its own, for a question often names
the sort of its answer and the answer the instance ("what substitution does Nate suggest
for butter?" → "coconut oil instead"; "what command starts the dev server?" → "`pnpm
dev`"): silencing the gate for every prompt whose asked-for word no note holds cost LoCoMo
1.3 points of coverage on its tuning half, this rule none there and 0.2 held-out (chosen
on the tuning halves of bench_prompt_recall.py's sets: bench/README.md, "What is asked").

asked_for() finds the phrase: the words after "what('s| is) the", "which", "who is the",
"how many/much" (or after "what kind/type/sort of"), up to the first stop word or
preposition, or before a verb (a word followed by "the", "a", "our"...). A possessor
("Melanie's reason") is the subject, not the thing asked, and a name after a lower-case
word ("what helps Joanna stay ...") has left the phrase for the clause. A prompt with
several such questions gets none (a long prompt is not one question).
Standard library only."""

from __future__ import annotations

import re

from .terms import STOPWORDS, keyword_terms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

# A wh-word at the start of the prompt or of a sentence, the copula after it, a determiner.
_ASK = re.compile(
    r"(?:^|[.!?\n]\s*)(?:(?:so|and|but|ok|hey|also),?\s+)?"
    r"(?:what|which|who|whose|how\s+(?:many|much))\b"
    r"(?:'s|\u2019s|\s+is|\s+are|\s+was|\s+were)?"
    r"(?:\s+(?:the|a|an|our|my|your|their|its|this|that|these|those))?\s+",
    re.IGNORECASE)
# "what kind of car": a word naming a sort asks for the noun after its "of".
_SORT = re.compile(r"(?:kinds?|types?|sorts?)\s+of\s+", re.IGNORECASE)
_WORD = re.compile(r"[^\W_][\w'\u2019.\-]*[^\W_]|[^\W_]")
_DETERMINERS = frozenset("the a an my our your their this these those".split())
_ENDS = re.compile(r"[,;:?!()\"]")
# Prepositions that are not in the keyword stop words: the phrase ends before them too.
_PREPOSITIONS = frozenset("""according across along among around behind beside besides
beyond despite inside near onto outside per regarding since toward towards upon via within
without like""".split())


def asked_for(prompt: str) -> tuple[str, ...]:
    """The keyword terms of the phrase the prompt's one wh-question asks about, its head last
    (() when it asks none, or several)."""
    phrases = []
    for m in _ASK.finditer(prompt):
        rest = _ENDS.split(prompt[m.end():], maxsplit=1)[0]
        sort = _SORT.match(rest)
        phrase = _phrase(rest[sort.end():] if sort else rest)
        if phrase:
            phrases.append(phrase)
    return tuple(keyword_terms(" ".join(phrases[0]))) if len(phrases) == 1 else ()


def _phrase(text: str) -> list[str]:
    """The words of the noun phrase `text` starts with."""
    words: list[str] = []
    found = _WORD.findall(text)
    for raw, after in zip(found, [*found[1:], ""]):
        low = raw.lower()
        if low in STOPWORDS or low in _PREPOSITIONS or after.lower() in _DETERMINERS:
            break  # a word before "the" is the clause's verb ("which service holds the …")
        if words and raw[0].isupper() and not words[-1][0].isupper():
            break  # "what helps Joanna …": the clause's subject, past the phrase
        if low.endswith(("'s", "\u2019s")):
            words = []  # "Melanie's reason": the possessor is the subject, not the thing
            continue
        words.append(raw)
    return words


def misses(asked: Sequence[str], terms: Sequence[str], rows: Sequence[int],
           held: Sequence[bool]) -> bool:
    """Whether a candidate is about a neighbour of what is asked: the asked phrase's head
    (`asked`, head last) is held by no row of the memory, and the candidate holds another
    word of that phrase. `terms`: the prompt's keyword terms, `rows`: how many rows hold
    each, `held`: whether the candidate holds each with its branch (prompt_evidence's
    Candidate.terms, .term_rows, .held_branch)."""
    if len(asked) < 2:
        return False
    where = {t: i for i, t in enumerate(terms)}
    head = where.get(asked[-1])
    if head is None or rows[head] != 0:
        return False
    return any(held[where[t]] for t in asked[:-1] if t in where)
