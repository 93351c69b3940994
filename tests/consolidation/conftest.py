"""What the consolidation tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from lore_plugin.core.config import Settings


@pytest.fixture()
def settings(db_path: Path, tmp_path: Path) -> Settings:
    return Settings(db_path=db_path, home=tmp_path / "home")
