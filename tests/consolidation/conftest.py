"""What the consolidation tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.core.config import Settings
from lore_plugin.llm.budget import BudgetGuard, GuardedLLM
from lore_plugin.llm.client import AnthropicLLM
from lore_plugin.recall.memory import Memory
from tests.fake_anthropic import FakeAnthropic


@pytest.fixture()
def settings(db_path: Path, tmp_path: Path) -> Settings:
    return Settings(db_path=db_path, home=tmp_path / "home")


@pytest.fixture()
def spent_llm(tmp_path: Path, memory: Memory):
    """(an LLM behind a budget whose hour's one request is already spent, the fake API it
    would call): an LLM phase must stop at the refusal without a request."""
    guard = BudgetGuard(tmp_path / "budget.json", 1, clock=memory.clock)
    guard.acquire()
    with FakeAnthropic() as api:
        yield GuardedLLM(AnthropicLLM("sk-test", "claude-haiku-4-5", base_url=api.url,
                                      timeout=5.0, sleep=lambda s: None), guard), api
