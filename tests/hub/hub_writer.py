"""One writer process of the many-writers test and figure: it inserts fragments into one hub
space as one "home" (machine) for a bounded time, moving its transcript's watermark after
each, and returns the ids the hub acknowledged."""

from __future__ import annotations

import time

from lore_plugin.core.types import NewFragment
from lore_plugin.hub import HubStore, HubUnavailable


def write_for(url: str, space: str, home: str, proc: int, seconds: float
              ) -> tuple[str, int, list[str], int]:
    """(home, proc, acknowledged ids, failed attempts)."""
    store = HubStore(url, space, machine=home, pool_size=1)
    acked: list[str] = []
    failed = 0
    deadline = time.monotonic() + seconds
    i = 0
    try:
        while time.monotonic() < deadline:
            i += 1
            text = f"{home}/{proc}/{i}: the deploy of build {i} finished"
            try:
                with store.write():  # the fragment and the watermark move together
                    fid = store.insert(NewFragment(content=text, summary=text, depth=2), 1.0)
                    store.set_watermark(f"/t/{proc}.jsonl", i, 1.0)
                acked.append(fid)
            except HubUnavailable:
                failed += 1
    finally:
        store.close()
    return home, proc, acked, failed
