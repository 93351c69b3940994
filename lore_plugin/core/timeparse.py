"""Time expressions in a query → a time window, so recall can prefer what happened then.

Pure: the text, `now` (unix seconds) and a time zone in, a `TimeWindow` or None out. It knows
dates (2025-01-10, 8 May 2023, May 8th, 2023), months and years ("February 2025", "in
October", "2022"), parts of months ("early January", "late April", "first week of April",
"mid-August"), quarters (Q1 2025), relative periods (today, yesterday, last week, this month,
3 days ago, past 2 weeks, last Friday) and the modifiers around / since / after / before.
A month or day without a year means its latest occurrence up to now."""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

DAY = 86400.0
MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}
ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4,
            "4th": 4, "last": -1, "final": -1}

_MONTH = (r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|"
          r"aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?")
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAYN = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_B, _E = r"(?<![\w./-])", r"(?![\w/-]|\.\d)"  # not inside identifiers, versions or paths
_PART = r"(?P<part>early|beginning of|start of|mid|mid-|middle of|late|end of)"
_NTH = r"(?P<nth>first|1st|second|2nd|third|3rd|fourth|4th|last|final)"
_COUNT = r"(?P<n>\d+|a|an|one|two|three|four|five|six)"
_UNIT = r"(?P<unit>day|week|month|year)"

PATTERNS: list[tuple[str, str]] = [  # (kind, regex); earlier kinds win over later ones
    ("iso_day", _B + r"(?P<year>\d{4})[-/](?P<month>\d{1,2})[-/](?P<day>\d{1,2})" + _E),
    ("day_month", _B + _DAYN + r"(?:\s+of)?\s+" + _MONTH + r"(?:,?\s*" + _YEAR + r")?" + _E),
    ("month_day", _B + _MONTH + r"\s+" + _DAYN + r"(?:,\s*|\s+)?" + _YEAR + "?" + _E),
    ("week_of", _B + _NTH + r"\s+(?P<unit>week(?:end)?)\s+(?:of|in)\s+" + _MONTH
     + r"(?:,?\s+" + _YEAR + ")?" + _E),
    ("part_month", _B + _PART + r"\s*" + _MONTH + r"(?:,?\s+" + _YEAR + ")?" + _E),
    ("quarter", _B + r"q(?P<q>[1-4])\s*,?\s*" + _YEAR + _E),
    ("iso_month", _B + r"(?P<year>\d{4})-(?P<month>\d{1,2})" + _E),
    ("month_year", _B + _MONTH + r",?\s+" + _YEAR + _E),
    ("month", _B + r"(?:(?P<prep>in|during|since|after|before|until|of|from|last|this)\s+)?"
     + _MONTH + _E),
    # A bare number is too often not a year (ports, error codes): a year needs a preposition.
    ("year", _B + r"(?P<prep>in|during|since|after|before|until|of|from|throughout)\s+" + _YEAR + _E),
    ("ago", _B + _COUNT + r"\s+" + _UNIT + r"s?\s+ago" + _E),
    ("past", _B + r"(?:past|last|previous)\s+" + _COUNT + r"\s+" + _UNIT + "s?" + _E),
    ("relative", _B + r"(?P<rel>today|yesterday|the day before yesterday|"
     r"(?:this|last|past|previous)\s+(?:week(?:end)?|month|year))" + _E),
    ("weekday", _B + r"(?:last|on|this past)\s+"
     r"(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)" + _E),
]
_COMPILED = [(kind, re.compile(rx, re.IGNORECASE)) for kind, rx in PATTERNS]
_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_AROUND = re.compile(r"(?:around|about|circa|approximately|roughly|near|~)\s*$", re.IGNORECASE)
_BOUND = re.compile(r"(?P<dir>since|after|before|until|prior to)\s+(?:the\s+)?$", re.IGNORECASE)


@dataclass(frozen=True)
class TimeWindow:
    start: float  # unix seconds, inclusive
    end: float  # unix seconds, exclusive
    fuzz: float  # seconds; how quickly a match fades outside the window
    span: tuple[int, int]  # where the expression sits in the text

    def strip(self, text: str) -> str:
        """The text without its time expression: the time is used as time, not as words."""
        return f"{text[:self.span[0]]} {text[self.span[1]:]}".strip() or text

    def weight(self, when: float) -> float:
        """1 inside the window, falling off smoothly with the distance outside it."""
        if self.start <= when < self.end:
            return 1.0
        # Counted in started days: the midnight right after the window is a day later.
        gap = (self.start - when if when < self.start else when - self.end) // DAY * DAY + DAY
        return math.exp(-((gap / self.fuzz) ** 2))


def parse(text: str, now: float, tz: tzinfo | None = None) -> TimeWindow | None:
    """The time window a query talks about, or None."""
    zone = tz or datetime.now().astimezone().tzinfo or UTC
    today = datetime.fromtimestamp(now, zone).date()
    for kind, rx in _COMPILED:
        for match in rx.finditer(text):
            try:
                days = _resolve(kind, match, today)
                if days is not None:
                    return _window(text, match, days, now, zone)
            except (ValueError, KeyError, IndexError, OverflowError):
                continue  # 2025-13-45, year 9999 + a day and the like are not usable dates
    return None


def _resolve(kind: str, m: re.Match[str], today: date) -> tuple[date, date] | None:
    """[first day, last day] of the expression, or None when it is not really a date."""
    g = m.groupdict()
    if kind == "iso_day":
        d = date(int(g["year"]), int(g["month"]), int(g["day"]))
        return d, d
    if kind in ("day_month", "month_day"):
        month, day = MONTHS[g["month"].lower().rstrip(".")], int(g["day"])
        if g.get("year"):
            d = date(int(g["year"]), month, day)
        else:
            d = date(today.year, month, day)
            d = d if d <= today + timedelta(days=1) else date(today.year - 1, month, day)
        return d, d
    if kind == "iso_month":
        return _month(int(g["year"]), int(g["month"]))
    if kind in ("month_year", "month", "part_month", "week_of"):
        if kind == "month" and g["month"].lower() == "may" and not g.get("prep"):
            return None  # the verb, most of the time
        month = MONTHS[g["month"].lower().rstrip(".")]
        year = int(g["year"]) if g.get("year") else _latest_year(month, today, g.get("prep"))
        first, last = _month(year, month)
        if kind == "part_month":
            return _part(g["part"].lower(), first, last)
        if kind == "week_of":
            return _week_of(ORDINALS[g["nth"].lower()], g["unit"].lower(), first, last)
        return first, last
    if kind == "quarter":
        q, year = int(g["q"]), int(g["year"])
        return date(year, 3 * q - 2, 1), _month(year, 3 * q)[1]
    if kind == "year":
        return date(int(g["year"]), 1, 1), date(int(g["year"]), 12, 31)
    if kind in ("ago", "past"):
        n = int(g["n"]) if g["n"].isdigit() else _WORDS[g["n"].lower()]
        span = n * UNITS[g["unit"].lower()]
        if kind == "past":
            return today - timedelta(days=span), today
        center = today - timedelta(days=span)
        half = max(UNITS[g["unit"].lower()] // 2, 1) if g["unit"].lower() != "day" else 0
        return center - timedelta(days=half), center + timedelta(days=half)
    if kind == "relative":
        return _relative(" ".join(g["rel"].lower().split()), today)
    if kind == "weekday":
        back = (today.weekday() - WEEKDAYS[g["weekday"].lower()]) % 7 or 7
        d = today - timedelta(days=back)
        return d, d
    return None


def _month(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _latest_year(month: int, today: date, prep: str | None) -> int:
    if prep and prep.lower() == "this":
        return today.year
    return today.year if month <= today.month else today.year - 1


def _part(part: str, first: date, last: date) -> tuple[date, date]:
    if part in ("early", "beginning of", "start of"):
        return first, first.replace(day=10)
    if part in ("mid", "mid-", "middle of"):
        return first.replace(day=11), first.replace(day=20)
    return first.replace(day=21), last


def _week_of(nth: int, unit: str, first: date, last: date) -> tuple[date, date]:
    if unit == "weekend":
        saturdays = [first + timedelta(days=i) for i in range((last - first).days + 1)
                     if (first + timedelta(days=i)).weekday() == 5]
        sat = saturdays[nth - 1] if nth > 0 else saturdays[-1]
        return sat, sat + timedelta(days=1)
    if nth > 0:
        start = first + timedelta(days=7 * (nth - 1))
        return start, min(start + timedelta(days=6), last)
    return last - timedelta(days=6), last


def _relative(rel: str, today: date) -> tuple[date, date] | None:
    monday = today - timedelta(days=today.weekday())
    if rel == "today":
        return today, today
    if rel == "yesterday":
        return today - timedelta(days=1), today - timedelta(days=1)
    if rel == "the day before yesterday":
        return today - timedelta(days=2), today - timedelta(days=2)
    which, unit = rel.split()
    if unit == "week":
        if which == "this":
            return monday, today
        if which == "past":
            return today - timedelta(days=7), today
        return monday - timedelta(days=7), monday - timedelta(days=1)
    if unit == "weekend":
        sat = monday - timedelta(days=2) if which != "this" else monday + timedelta(days=5)
        return sat, sat + timedelta(days=1)
    if unit == "month":
        if which == "this":
            return today.replace(day=1), today
        if which == "past":
            return today - timedelta(days=30), today
        end = today.replace(day=1) - timedelta(days=1)
        return end.replace(day=1), end
    if unit == "year":
        if which == "this":
            return date(today.year, 1, 1), today
        if which == "past":
            return today - timedelta(days=365), today
        return date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)
    return None


def _window(text: str, m: re.Match[str], days: tuple[date, date], now: float,
            zone: tzinfo) -> TimeWindow:
    first, last = days
    start = datetime.combine(first, datetime.min.time(), zone).timestamp()
    end = datetime.combine(last + timedelta(days=1), datetime.min.time(), zone).timestamp()
    before = text[:m.start()]
    span_start = m.start()
    prep = (m.groupdict().get("prep") or "").lower()
    bound = _BOUND.search(before)
    direction = bound.group("dir").lower() if bound else prep
    if bound:
        span_start = bound.start()
    fuzz = max(DAY, 0.15 * (end - start))
    if direction in ("since", "after"):
        start, end = (start if direction != "after" else end), max(now, end)
    elif direction in ("before", "until", "prior to"):
        start, end = start - 365 * DAY, start
    around = _AROUND.search(text[:span_start])
    if around:
        span_start = around.start()
        fuzz *= 3
    return TimeWindow(start, end, fuzz, (span_start, m.end()))


MAX_WRITTEN_DAYS = 92  # a quarter; longer periods (a year, "since March") date nothing


def written_dates(text: str, today: date) -> list[tuple[date, date]]:
    """The days and periods a note's own text names ("2025-01-10 | deployed the Spark job",
    "the outage in early March 2024"), as [first day, last day], for time-aware recall of
    knowledge stored long after the fact. `today` is the note's creation day, which relative
    expressions ("yesterday") count from. Open ranges (since, before) and periods longer
    than a quarter are left out: they would date the note on too many days."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[date, date]] = []
    for kind, rx in _COMPILED:
        for match in rx.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            prep = (match.groupdict().get("prep") or "").lower()
            if _BOUND.search(text[:match.start()]) or prep in (
                    "since", "after", "before", "until"):
                continue
            try:
                days = _resolve(kind, match, today)
            except (ValueError, KeyError, IndexError, OverflowError):
                continue
            if days is None or (days[1] - days[0]).days >= MAX_WRITTEN_DAYS:
                continue
            taken.append(match.span())
            if days not in found:
                found.append(days)
    return found
