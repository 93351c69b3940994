"""Query timings of one checkout's code against a hub space already filled and the same
memory in SQLite (bench_hub.py --base runs it for the old checkout and this one, alternating).

    PYTHONPATH=CHECKOUT python bench/hub_query_worker.py URL SPACE SQLITE_FILE N [--ranking]

Memory.query answers bench_server.py's first N queries from both, alternating which goes
first query by query, with reinforcement as the tool does (the SQLite file is a copy, so the
cache stays as built). Prints one JSON line: p50 and p95 of each. With --ranking, the hub's
answers without reinforcement instead: ids and scores of each query, to compare two
checkouts' rankings on the same data. With --reads, the hub alone without reinforcement:
the read path's p50 and p95."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Lore first, from PYTHONPATH (the checkout being timed): bench_server puts this checkout
# at the front of sys.path, and a package imported before that stays the one imported.
import lore_plugin  # noqa: E402
from lore_plugin.hub import HubStore  # noqa: E402
from lore_plugin.recall.memory import Memory  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import copy_db, make_embedder, pct, queries  # noqa: E402

TIMED = Path(os.environ["PYTHONPATH"]).resolve()
assert Path(lore_plugin.__file__ or "").resolve().is_relative_to(TIMED), lore_plugin.__file__

PROJECT = "/home/dev/src/project-a"


def ranking(url: str, space: str, n: int) -> None:
    hub = HubStore(url, space)
    memory = Memory(hub, make_embedder(), project=PROJECT)
    out = []
    for text, depth in queries(n):
        found = memory.query(text, depth=depth, reinforce=False).fragments
        out.append([[s.fragment.id, round(s.score, 9)] for s in found])
    memory.close()
    hub.close()
    print(json.dumps(out))


def reads(url: str, space: str, n: int) -> None:
    """The hub alone, without reinforcement: the read path's p50 and p95."""
    hub = HubStore(url, space)
    memory = Memory(hub, make_embedder(), project=PROJECT)
    asked = queries(n + 10)
    for text, depth in asked[:10]:
        memory.query(text, depth=depth, reinforce=False)
    took = []
    for text, depth in asked[10:]:
        started = time.perf_counter()
        memory.query(text, depth=depth, reinforce=False)
        took.append(time.perf_counter() - started)
    memory.close()
    hub.close()
    print(json.dumps({"hub_read_p50_ms": round(1000 * statistics.median(took), 1),
                      "hub_read_p95_ms": round(1000 * pct(took, 95), 1)}))


def timings(url: str, space: str, db: Path, n: int) -> None:
    embedder = make_embedder()
    work = Path(tempfile.mkdtemp()) / "memory.db"
    copy_db(db, work)
    hub = HubStore(url, space)
    sqlite = Memory(work, embedder, project=PROJECT)
    pg = Memory(hub, embedder, project=PROJECT)
    asked = queries(n + 10)
    for text, depth in asked[:10]:  # warm both: the index load, the pool, the model
        sqlite.query(text, depth=depth)
        pg.query(text, depth=depth)
    took: dict[str, list[float]] = {"sqlite": [], "hub": []}
    for i, (text, depth) in enumerate(asked[10:]):
        order = [("sqlite", sqlite), ("hub", pg)]
        for name, memory in order if i % 2 else order[::-1]:
            t = time.perf_counter()
            memory.query(text, depth=depth)
            took[name].append(time.perf_counter() - t)
    sqlite.close()
    pg.close()
    hub.close()
    shutil.rmtree(work.parent, ignore_errors=True)
    out = {}
    for name, values in took.items():
        out[f"{name}_p50_ms"] = round(1000 * statistics.median(values), 1)
        out[f"{name}_p95_ms"] = round(1000 * pct(values, 95), 1)
    print(json.dumps(out))


if __name__ == "__main__":
    url, space, db, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    if "--ranking" in sys.argv:
        ranking(url, space, n)
    elif "--reads" in sys.argv:
        reads(url, space, n)
    else:
        timings(url, space, db, n)
