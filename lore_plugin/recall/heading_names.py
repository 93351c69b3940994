"""The name of a heading that placement makes for a lone fact (storing._place): what the fact
is about, not a copy of it. No LLM at store time, so the subject is read from the fact's own
summary by its shape, in this order:

- "Canary deploys: a new build takes 5 % ..." — a short lead before a colon is the subject;
- otherwise its leading noun phrase: the first run of words that are not function words,
  after any leading verbs ("Deployed new Spark job for ..." is about "new Spark job"), up
  to the first verb-like word, function word, number or clause mark, at most MAX_WORDS;
- if that leaves nothing, the summary's first keyword terms.

English has no marker for a verb, so the phrase's end is guessed from the words around it
(see _ends_phrase). A wrong guess costs a less telling name, never a lost fact: the name only
labels the branch, and consolidation may rename it later (PLACED_NAME marks it)."""

from __future__ import annotations

import re

from .terms import STOPWORDS, keyword_terms

# A heading placement made and named without an LLM: metadata key, valued by how it was named
# ("project", "loose", "subject"), for a later pass that may name it better.
PLACED_NAME = "placed_name"
MAX_WORDS = 4
NAMES = 2  # names kept after the subject phrase
LEAD_WORDS = 5  # a lead before a colon longer than this is a sentence, not a subject
_TOKEN = re.compile(r"[^\s,;:()\[\]\"]+|[,;:()\[\]\"]")
_CLAUSE = frozenset(",;:()[]\"")
# Function words that may also open a phrase without being part of it ("Set up", "Our").
_AUXILIARIES = frozenset(
    "is are was were be been being am has have had do does did can could will would should "
    "shall may might must".split())
# Past forms that do not end in -ed, for notes written as "Wrote a post about X".
_IRREGULAR_PAST = frozenset(
    "set wrote built made ran found got took began led met put sent kept gave chose drew "
    "brought bought caught taught thought fought held told sold spent lost left read broke "
    "won grew rose fell came went saw knew became".split())
# Words that open an object: a plural-looking word right before one is a verb ("pins every").
_DETERMINERS = frozenset(
    "a an the every each all its their our your his her this that these those some any no "
    "one two three several many".split())

# Words that open a singular noun: an -s word right after that noun is its verb ("Every pod
# declares requests" is about "Pod", where "Annual plans get" keeps "plans").
_SINGULAR = frozenset("a an every each this that one".split())
# Adverbs of time and manner that follow a verb or end a subject ("Hack week happens twice a
# year", "Checking significance daily inflates"): never part of a heading's noun phrase.
_ADVERBS = frozenset(
    "daily weekly monthly yearly nightly hourly once twice always never often usually rarely "
    "sometimes regularly quickly slowly automatically".split())

# What safety/redact.py leaves where a secret or a <private> section was: it names nothing, so
# no heading is named after it ("Key (REDACTED)"). Spelled here, not imported: the redactor's
# module compiles its patterns on import, and this one is on the per-prompt hook's path.
_REDACTION = re.compile(r"\[(?:REDACTED:[^\]\s]*|PRIVATE)\]")

_CALENDAR = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april "
    "may june july august september october november december utc gmt".split())


def subject_name(summary: str, names: frozenset[str] = frozenset()) -> str:
    """The subject of a fact's summary, as a heading of at most MAX_WORDS words, spelled as
    the summary spells them ("mypy" stays lower-case). `names`: words known to be names (the
    project's, in lower case), never read as a plural or a verb ("Atlas local dev" is about
    the local dev setup of atlas, not "Atlas" followed by a verb)."""
    summary = _REDACTION.sub(" ", summary)
    text = " ".join(summary.split()).strip().rstrip(".!?")
    lead, colon, rest = text.partition(": ")
    if colon and rest and all(_is_number(word) for word in lead.split()):
        text = rest  # "2026-09-14: atlas DB upgraded ..." is dated, not about its date
    elif colon and keyword_terms(lead) and len(lead.split()) <= LEAD_WORDS:
        text = lead
    tokens = _TOKEN.findall(text)
    words = _leading_phrase(tokens, names)
    after = _names_after(_TOKEN.findall(" ".join(summary.split())), words)
    if words and words[0] != tokens[0] and words[0].isalpha() and words[0].islower():
        # "The billing deploy window is ..." gives "Billing deploy window"; a word that opens
        # the summary in lower case ("mypy runs ...") is spelled so on purpose and kept.
        words = [words[0].capitalize(), *words[1:]]
    if not words:
        words = keyword_terms(text)[:3]
    if not words:
        return text[:40] or "Notes"
    phrase = " ".join(words).strip(" -/'") or "Notes"
    return f"{phrase} ({', '.join(after)})" if after else phrase


def phrase_of(name: str) -> str:
    """The subject phrase of a name subject_name gave, without the names after it."""
    return name.split(" (", 1)[0]


def opens(name: str, summary: str) -> bool:
    """Whether the subject phrase of `name` is the first words of `summary`, once the words
    that open a sentence without naming anything are skipped: "Checking significance" and
    "Book club" open "Checking significance daily inflates…" and "The book club meets…", so
    above that fact the name says nothing its own line does not."""
    phrase = _TOKEN.findall(phrase_of(name).lower())
    tokens = _TOKEN.findall(" ".join(summary.split()).lower())
    start = 0
    while start < len(tokens) and _is_function(tokens[start]):
        start += 1
    return bool(phrase) and tokens[start:start + len(phrase)] == phrase


def _names_after(tokens: list[str], phrase: list[str]) -> list[str]:
    """Up to NAMES names the summary gives beyond its subject phrase (the project, person
    or product it concerns: "FTS5 search backend (claude-memory)", "Pair programming (Sarah
    Chen)"): capitalised words inside the sentence, consecutive ones together, and
    identifiers (an underscore, a dot or a hyphen between letters, as "toast-analytics")."""
    taken = {_plain(w) for w in phrase}
    names: list[str] = []
    run: list[str] = []
    for i, token in enumerate([*tokens, ","]):
        word = token.strip("'.,")
        if i > 0 and _is_name(word) and _plain(word) not in taken:
            run.append(word)
            continue
        if run:
            names.append(" ".join(run))
            run = []
    return names[:NAMES]


def _is_name(word: str) -> bool:
    if (not word or _is_number(word) or _is_function(word) or not word[0].isalnum()
            or word.lower().removesuffix("s") in _CALENDAR or (word.isupper() and len(word) < 3)):
        return False  # a day or a unit ("Friday", "MB") dates or measures, it names nothing
    if word[:1].isupper() or any(c.isupper() for c in word[1:]):
        return True
    parts = re.split(r"[_.\-]", word)
    return (len(parts) > 1 and all(len(p) >= 4 and p.isalpha() for p in parts)
            and not parts[-1].lower().endswith(("ed", "ing")))  # "squash-merged" describes


def _plain(token: str) -> str:
    return token.strip("'.-").lower()


def _is_function(token: str) -> bool:
    word = _plain(token)
    return not word or word in STOPWORDS or word in _AUXILIARIES or word in _DETERMINERS


def _is_number(token: str) -> bool:
    return any(c.isdigit() for c in token) and not any(c.isalpha() for c in token[:1])


def _past(token: str) -> bool:
    word = _plain(token)
    return word in _IRREGULAR_PAST or (len(word) > 4 and word.endswith("ed"))


def _plural_or_third(word: str) -> bool:
    """Ends like a plural noun or a verb's third person ("plans", "pins"), not "class" nor a
    possessive ("User's shell" goes on to its noun)."""
    return (len(word) > 3 and word.endswith("s")
            and not word.endswith(("ss", "us", "is", "'s", "\u2019s")))


def _leading_phrase(tokens: list[str], names: frozenset[str] = frozenset()) -> list[str]:
    i = 0
    # Skip what opens the sentence without naming anything: "The", "We", "Deployed", "Set up".
    while i < len(tokens) and (tokens[i] in _CLAUSE or _is_function(tokens[i])
                               or _is_number(tokens[i]) or _past(tokens[i])):
        i += 1
    single = i > 0 and _plain(tokens[i - 1]) in _SINGULAR  # "Every pod ...", "A lock file ..."
    phrase: list[str] = []
    while i < len(tokens) and len(phrase) < MAX_WORDS:
        token = tokens[i]
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if token in _CLAUSE or _is_function(token) or _is_number(token):
            break
        named = _plain(token) in names  # a name, whatever its ending ("Atlas")
        if phrase and not named and (_ends_phrase(token, after) or _plain(token) in _ADVERBS
                                     or (single and _plural_or_third(_plain(token)))):
            break  # the verb, or an adverb: "Every pod declares", "significance daily"
        phrase.append(token)
        if after in _CLAUSE or (not named and _plural_or_third(_plain(token))):
            break  # a plural closes the phrase: the next word is its verb ("Trials last")
        i += 1
    return phrase


def _ends_phrase(token: str, after: str | None) -> bool:
    """Whether `token`, following words already in the phrase, is its verb: a past form
    ("cache grew"), or an -s or -ing word followed by what opens an object (a determiner, a
    number, a name, an identifier): "A lock file pins every package" and "server using
    FastMCP" end before it, while "Annual plans get two months", "False alarms from the disk"
    and "Connection pooling with" keep it."""
    word = _plain(token)
    if _past(token):
        return True
    if after is None or after in _CLAUSE:
        return False  # "Canary deploys: ...": the phrase ends here with its noun
    nxt = _plain(after)
    if nxt in _ADVERBS and _plural_or_third(word):
        return True  # "Hack week happens twice": an adverb follows a verb, not a noun
    if nxt in _AUXILIARIES or not (_plural_or_third(word)
                                   or (len(word) > 4 and word.endswith("ing"))):
        return False  # "Pull requests are ...": the noun before the verb
    if (_plural_or_third(word) and word.isalpha() and not word.endswith("ics")
            and _plural_or_third(nxt) and after[:1].islower()):
        # A noun's modifier is singular ("sensor readings"), so an -s word before a plural
        # is a verb and its object ("Stripe handles invoices"); "analytics" is one noun.
        return True
    return (nxt in _DETERMINERS or _is_number(after) or after[:1].isupper()
            or any(c in after for c in "._/-"))
