"""Handing the heap's free memory back to the system, where the C library allows it."""

from __future__ import annotations

import sys


def give_back() -> None:
    """glibc's malloc_trim(0): free memory inside the heap (not only at its top) goes back to
    the system. After a large transient load (the vector index read from SQLite, then
    swapped for its snapshot) glibc otherwise keeps it: 12 MB at 100K fragments
    (bench/bench_service_memory.py). A no-op where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
