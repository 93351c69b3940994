"""The ingestion setup test_ingest.py and test_loops.py share: settings on a scratch home,
and an Ingestor that talks to the fake API (`api`, tests/conftest.py) with the real model."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.capture.ingest import Ingestor
from lore_plugin.core.config import Settings
from lore_plugin.llm.client import pick_llm


@pytest.fixture()
def batch_bytes() -> int:
    """Several batches for a 30-turn session; a test file overrides it for other sizes."""
    return 6000


@pytest.fixture()
def settings(tmp_path: Path, batch_bytes: int) -> Settings:
    return Settings(db_path=tmp_path / "memory.db", home=tmp_path / "home", batch_bytes=batch_bytes,
                    retry_backoff_secs=0.0, park_after=3, max_requests_per_hour=10_000)


@pytest.fixture()
def ingestor(settings, api, embedder, clock):
    llm = pick_llm(settings, env={"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.url})
    ingestor = Ingestor(settings, llm, embedder, clock)
    yield ingestor
    ingestor.close()
