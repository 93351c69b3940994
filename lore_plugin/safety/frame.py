"""Recalled text as data: what remembered text becomes before Lore hands it to the model.

A fragment holds whatever a conversation or an import held, including text made to look like
markup: `</recalled-notes>` to end Lore's frame early, or `</system-reminder><user>` to pose
as Claude Code itself (it wraps hook context in `<system-reminder>`). A model reads a tag by
its look, not its bytes, so an exact-match check is easy to slip past: a zero-width space in
the tag, full-width brackets, an entity, a bidi override. So `neutralise` first makes the text
plain (invisible and bidi controls removed, NFKC) and then rewrites every tag-shaped sequence,
whatever its name, as a bracketed mention of it: `</user>` becomes `[/user]`.

`framed` wraps neutralised text in the one frame Lore writes; `reframed` checks a frame built
by another process (a running server answering the per-prompt hook).

Standard library only (re, unicodedata): the per-prompt hook imports this on its fast path."""

from __future__ import annotations

import functools
import re
import unicodedata

TAG = "recalled-notes"
ELLIPSIS = "\u2026"

# Invisible characters: every format control (Unicode category Cf: zero-width spaces and
# joiners, bidi embeddings, overrides and isolates, the soft hyphen, tag characters), the
# variation selectors, the combining grapheme joiner and the Hangul fillers.
# tests/safety/test_frame.py checks the Cf part against the Unicode database.
_INVISIBLE = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
    "\u034f\u115f\u1160\u3164\uffa0\u180b-\u180d\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef]")

# Single angle brackets as NFKC leaves them (it turns the full-width, small and vertical ones
# into these): the quotation marks, the CJK and mathematical brackets, the ornaments, the
# modifier arrowheads, the syllabic look-alikes, and < and > with a combining stroke.
# tests/safety/test_frame.py finds the look-alikes by name in the Unicode database.
OPENERS = "<\u2039\u3008\u27e8\u276c\u276e\u2770\u2991\u2993\u29fc\u02c2\u02f1\u1438\u226e"
CLOSERS = ">\u203a\u3009\u27e9\u276d\u276f\u2771\u2992\u2994\u29fd\u02c3\u02f2\u1433\u226f"
# The forms NFKC folds into those: an entity naming one is decoded only after NFKC has run.
_FOLDED_OPENERS = "\uff1c\ufe64\u2329\ufe3f"
_FOLDED_CLOSERS = "\uff1e\ufe65\u232a\ufe40"


def _written(chars: str, folded: str, names: str) -> str:
    """A pattern for any of `chars`, and for the other ways to write them (or the `folded`
    forms) that a reader may decode: HTML entities (named, decimal, hexadecimal, with or
    without the semicolon, encoded again as &amp;), backslash escapes (\\u003c, \\x3c,
    \\u{3c}) and percent-encoding (%3C, %253C, %u003C, %E2%80%B9)."""
    every = chars + folded
    names = "|".join(sorted(names.split(), key=len, reverse=True))  # langle before lang
    dec = "|".join(str(ord(c)) for c in every)
    hexa = "|".join(f"{ord(c):x}" for c in every)
    utf8 = "|".join("%".join(f"{b:02x}" for b in c.encode()) for c in every)
    return (rf"(?:[{chars}]|&(?:amp;)*+(?:{names}|#0*+(?:{dec})|#x0*+(?:{hexa}));?"
            rf"|\\(?:u\{{?+|x\{{?+|U)0*+(?:{hexa})\}}?"
            rf"|%(?:25)*+(?:u0*+(?:{hexa})|{utf8}))")


SLASHES = "/\u2044\u2215\u29f8"  # and the fraction, division and big solidus
# The HTML entity names of each (the test lists them from html.entities).
_OPEN = _written(OPENERS, _FOLDED_OPENERS,
                 "lt LeftAngleBracket NotLess lang langd langle lparlt lsaquo nless nlt")
_CLOSE = _written(CLOSERS, _FOLDED_CLOSERS,
                  "gt RightAngleBracket NotGreater rang rangd rangle rpargt rsaquo ngt ngtr")
_SLASH = _written("!?" + SLASHES, "\uff0f", "sol frasl excl quest")
_BANG = r"(?:!|&(?:amp;)*+(?:excl;?|#0*+33;?|#x0*+21;?))"
# Between the bracket and the name: space, and combining marks a writer may stack on it.
_GAP = r"[\s\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]*+"
# A name is letters, digits and .:- but for the syllabic PO, a letter that closes like >.
# Possessive quantifiers: a run of spaces or `&amp;` is read once, never rescanned from each
# position in it, so the pattern stays linear on any input.
_TAG_SHAPE = (
    rf"{_OPEN}(?P<gap>{_GAP})"
    rf"(?:(?P<mark>{_SLASH})?{_GAP}(?P<name>[^\W\d\u1433](?:[^\W\u1433]|[.:-])*+)"
    rf"|(?P<comment>{_BANG}--))"
    rf"(?P<rest>(?:[^\W\u1433]|[ \t.:=\"'/-])*+)(?P<close>{_CLOSE})?")
# Every tag shape starts with one of these; most text holds none, and then the pattern (some
# 10 ms to compile, paid by the per-prompt hook) is never compiled.
_MAY_OPEN = re.compile(f"[{OPENERS}&\\\\%]")


@functools.cache
def _tag_shape() -> re.Pattern[str]:
    return re.compile(_TAG_SHAPE, re.IGNORECASE)


def _mention(m: re.Match[str]) -> str:
    """A tag rewritten as a mention of it: square brackets, any slash as a plain one. With a
    space after the bracket and no slash, only `< name >` is a tag: `a < b and c > d` and
    `a < b` are comparisons, left as they are."""
    mark = m.group("mark")
    spaced = any(c.isspace() for c in m.group("gap"))
    if spaced and mark is None and m.group("name") and (
            not m.group("close") or m.group("rest").strip()):
        return m.group(0)
    head = ("!--" if m.group("comment") else
            ("" if mark is None else mark if mark in ("!", "?") else "/") + m.group("name"))
    return f"[{head}{m.group('rest')}" + ("]" if m.group("close") else "")


def neutralise(text: str) -> str:
    """Remembered text made safe to show the model: no invisible or bidi controls, NFKC, and
    no sequence that reads as a tag. Applying it twice changes nothing more."""
    text = _INVISIBLE.sub("", text)
    # NFKC but for the ellipsis, which it spells "...": a clipped line ends in one, and a
    # text neutralised again inside its frame must not grow past the room it was given.
    plain = ELLIPSIS.join(unicodedata.normalize("NFKC", part) for part in text.split(ELLIPSIS))
    plain = _INVISIBLE.sub("", plain)
    return _tag_shape().sub(_mention, plain) if _MAY_OPEN.search(plain) else plain


def framed(body: str, notice: str) -> str:
    """The data block: Lore's own tag, the notice, and the body with no tag of its own, so the
    block always ends where Lore ends it."""
    return f"<{TAG}>\n{notice}\n{neutralise(body)}\n</{TAG}>"


def reframed(text: str) -> str | None:
    """A frame another process built, made safe again: its inside neutralised (a server from
    before this check may still be running); None when it is not one whole frame."""
    head, tail = f"<{TAG}>\n", f"\n</{TAG}>"
    if len(text) < len(head) + len(tail) or not text.startswith(head) or not text.endswith(tail):
        return None
    return head + neutralise(text[len(head):-len(tail)]) + tail
