"""Consolidation (placeholder entry point until the seven phases land)."""

from __future__ import annotations

from collections.abc import Callable

from .config import Settings


def run_if_overdue(settings: Settings, clock: Callable[[], float], force: bool = False) -> dict | None:
    return None
