"""Token accounting: what each LLM call cost, what the day has spent, and the daily budget.

Every call made through llm.GuardedLLM is written to the llm_usage table (time, purpose,
project, model, tokens, cost), so every Lore process shares one ledger and one daily budget.
The budget counts tokens since local midnight; when it is spent, calls are refused before any
request is made (DailyBudgetSpent) and extraction waits with its watermark in place.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.config import Settings
from ..core.errors import BudgetExceeded

log = logging.getLogger(__name__)
DAY = 86400.0

# List prices in USD per million tokens (input, output), by model family, from the model pages
# of platform.claude.com (checked 2026-11-25). A dated model id (claude-haiku-4-5-20251001) is
# priced as its family; an unknown model or alias has no price, and the figures say so rather
# than guess. Extraction sets no cache breakpoints; cache reads and writes, should a backend
# report some, are priced at the usual 0.1x and 1.25x of input.
PRICES: dict[str, tuple[float, float]] = {
    "claude-haiku-5-5": (0.10, 0.50),  # the "from" price: prompts under 100K tokens, as Lore's
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-haiku": (0.25, 1.25),
    "claude-sonnet-5-5": (2.0, 10.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-opus-5-5": (4.0, 20.0),
    "claude-opus-5": (5.0, 25.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-fable-5-1": (10.0, 50.0),
}
CACHE_READ, CACHE_WRITE = 0.1, 1.25

# The purpose of a call, told by the tool it forces (the LLM seam has no other context).
PURPOSES = {"record_knowledge": "extraction",
            "record_heading_names": "consolidation (3: heading names)",
            "record_topic_descriptions": "consolidation (3: re-summarise)",
            "report_contradictions": "consolidation (4: contradictions)"}


def price_of(model: str) -> tuple[float, float] | None:
    name = re.sub(r"-\d{8}$", "", model.strip().lower())  # a dated snapshot of the family
    for family in sorted(PRICES, key=len, reverse=True):
        if name == family or name.startswith(family + "-"):
            return PRICES[family]
    return None


@dataclass(frozen=True)
class Usage:
    """One call's tokens; cost_usd when the backend reported it (the claude CLI does)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def cost(self, model: str) -> float | None:
        if self.cost_usd is not None:
            return self.cost_usd
        price = price_of(model)
        if price is None:
            return None
        per_in, per_out = price
        weighted = (self.input_tokens + CACHE_READ * self.cache_read_tokens
                    + CACHE_WRITE * self.cache_write_tokens)
        return (weighted * per_in + self.output_tokens * per_out) / 1e6


def _count(data: Any, key: str) -> int:
    value = data.get(key) if isinstance(data, dict) else getattr(data, key, None)
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def usage_from(data: Any, cost_usd: Any = None) -> Usage | None:
    """The SDK's `message.usage` object or the CLI's `usage` dict, as a Usage."""
    if data is None:
        return None
    cost = float(cost_usd) if isinstance(cost_usd, int | float) and cost_usd >= 0 else None
    return Usage(_count(data, "input_tokens"), _count(data, "output_tokens"),
                 _count(data, "cache_read_input_tokens"),
                 _count(data, "cache_creation_input_tokens"), cost)


def estimated_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    return Usage(input_tokens, output_tokens).cost(model)


def day_start(now: float) -> float:
    """Local midnight before `now`: the daily budget is a calendar day's."""
    local = time.localtime(now)
    return time.mktime((local.tm_year, local.tm_mon, local.tm_mday, 0, 0, 0, 0, 0, -1))


def next_day(now: float) -> float:
    return day_start(day_start(now) + DAY + 3 * 3600)  # + 3 h: safe across a DST change


def month_start(now: float) -> float:
    local = time.localtime(now)
    return time.mktime((local.tm_year, local.tm_mon, 1, 0, 0, 0, 0, 0, -1))


class DailyBudgetSpent(BudgetExceeded):
    """max_tokens_per_day is spent: calls wait for the next day."""


class Ledger:
    """The llm_usage table, opened for each operation: a call takes seconds, an open ~1 ms."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.settings, self.clock = settings, clock

    def _store(self, readonly: bool = False):  # noqa: ANN202 - a Store
        from ..store import Store

        return Store(self.settings.db_path, readonly=readonly)

    def record(self, purpose: str, project: str | None, model: str, usage: Usage) -> None:
        store = self._store()
        try:
            store.record_usage(self.clock(), purpose, project, model, usage.total_input,
                               usage.output_tokens, usage.cost(model))
        finally:
            store.close()

    def spent_today(self) -> int:
        if not self.settings.db_path.exists():
            return 0
        store = self._store(readonly=True)
        try:
            return store.tokens_since(day_start(self.clock()))
        finally:
            store.close()

    def check(self) -> None:
        """DailyBudgetSpent when today's tokens reached max_tokens_per_day. Calls already in
        flight in other processes may overshoot it by one call each."""
        reason = budget_spent(self.settings, self.spent_today(), self.clock())
        if reason:
            raise DailyBudgetSpent(reason)


def budget_spent(settings: Settings, spent: int, now: float) -> str | None:
    """The message saying the daily budget is spent and when extraction resumes, or None."""
    cap = settings.max_tokens_per_day
    if spent < cap:
        return None
    resume = next_day(now)
    hours = (resume - now) / 3600
    return (f"daily token budget spent ({spent:,} of {cap:,} tokens today); extraction "
            f"resumes at {time.strftime('%H:%M', time.localtime(resume))} (in {hours:.1f} h), "
            "nothing is lost")


def _calls(count: int) -> str:
    return f"{count} call" + ("" if count == 1 else "s")


def _fmt_cost(cost: float | None, unpriced: bool) -> str:
    if cost is None:
        return "cost unknown"
    shown = "<$0.01" if 0 < cost < 0.005 else f"${cost:.2f}"
    return shown + (" + unpriced calls" if unpriced else "")


def usage_lines(settings: Settings, store: Any, now: float) -> list[str]:
    """`lore status`: today's and this month's tokens and cost, the last 7 days by purpose,
    and the budget."""
    def total(since: float) -> str:
        rows = store.usage_since(since)
        calls = sum(r[1] for r in rows)
        tokens_in, tokens_out = sum(r[2] for r in rows), sum(r[3] for r in rows)
        costs = [r[4] for r in rows if r[4] is not None]
        unpriced = any(r[4] is None for r in rows)
        cost = sum(costs) if costs else (None if unpriced else 0.0)
        return (f"{_calls(calls)}, {tokens_in:,} in + {tokens_out:,} out tokens, "
                f"{_fmt_cost(cost, unpriced and bool(costs))}")

    today = day_start(now)
    spent = store.tokens_since(today)
    lines = [f"tokens     today: {total(today)}",
             f"           this month: {total(month_start(now))}",
             f"           daily budget: {spent:,} of {settings.max_tokens_per_day:,} tokens used"]
    waiting = budget_spent(settings, spent, now)
    if waiting:
        lines.append(f"           {waiting}")
    week = store.usage_since(now - 7 * DAY)
    if week:
        lines.append("           last 7 days by purpose:")
        for purpose, calls, tin, tout, cost in week:
            lines.append(f"             {purpose}: {_calls(calls)}, {tin:,} in + {tout:,} out, "
                         f"{_fmt_cost(cost, False)}")
    return lines
