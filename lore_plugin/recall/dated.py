"""Time-aware recall beyond creation dates: the fragments whose own text names the time a
query asks about (Store.dated_near, filled from timeparse.written_dates when the text is
written), and how well a period so named fits the query's window."""

from __future__ import annotations

from datetime import date, datetime, tzinfo
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.timeparse import TimeWindow
    from ..store import Store
    from .search import VectorIndex

SCAN = 2000  # fragments dated in their text near a queried time, read at most
KEEP = 100  # of those, the most similar to the query join the candidates
REACH = 3  # how many of the window's fuzz widths around it a named day may lie


def _zone(tz: tzinfo | None) -> tzinfo | None:
    return tz or datetime.now().astimezone().tzinfo


def day_span(start: float, end: float, tz: tzinfo | None) -> tuple[int, int]:
    """The calendar days [first, last] (date ordinals) of [start, end) in unix seconds."""
    zone = _zone(tz)
    first = datetime.fromtimestamp(start, zone).date()
    last = datetime.fromtimestamp(max(end - 1, start), zone).date()
    return first.toordinal(), last.toordinal()


def period_weight(window: TimeWindow, days: tuple[int, int], tz: tzinfo | None) -> float:
    """1 when the named period [first, last day] overlaps the window, else the window's own
    fade at the period's nearest edge."""
    zone = _zone(tz)
    first = datetime.combine(date.fromordinal(days[0]), datetime.min.time(), zone).timestamp()
    end = datetime.combine(date.fromordinal(days[1] + 1), datetime.min.time(),
                           zone).timestamp()
    if first < window.end and window.start < end:
        return 1.0
    return window.weight(end - 1 if end <= window.start else first)


def candidates(store: Store, index: VectorIndex, window: TimeWindow, qvec: Any | None,
               tz: tzinfo | None) -> dict[str, list[tuple[int, int]]]:
    """Fragments whose text names a day or period in or near the window, with those periods:
    when more than KEEP do, the KEEP most similar to the query (or the first KEEP read, with
    no query vector)."""
    reach = REACH * window.fuzz
    dated = store.dated_near(*day_span(window.start - reach, window.end + reach, tz), SCAN)
    if len(dated) > KEEP and qvec is not None:
        sims = index.similarities(qvec, dated)
        best = sorted(dated, key=lambda fid: sims.get(fid, -1.0), reverse=True)
        return {fid: dated[fid] for fid in best[:KEEP]}
    return dict(list(dated.items())[:KEEP])
