"""Which statements a hub `query_memory` runs, and what each costs (issue 28's profile).

    python bench/hub_statements.py URL SPACE SQLITE_FILE [--queries 50]

Every psycopg execute is timed (wall time of the round trip, as the caller sees it) while
Memory.query answers bench_server.py's queries against a hub space filled beforehand
(bench_hub.py's push), with reinforcement as the tool does. Prints, per kind of statement
(its first words), how many run per query and their median and total time per query, and
the round trips per query."""

from __future__ import annotations

import argparse
import collections
import re
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import make_embedder, queries  # noqa: E402
from common import ROOT, table  # noqa: E402

sys.path.insert(0, str(ROOT))
import psycopg  # noqa: E402

from lore_plugin.hub import HubStore  # noqa: E402
from lore_plugin.recall.memory import Memory  # noqa: E402

LOG: list[tuple[str, str, float]] = []  # (thread, statement kind, seconds)
_lock = threading.Lock()


def kind(sql: str) -> str:
    words = re.sub(r"\s+", " ", str(sql)).strip()
    return words[:90]


def instrument() -> None:
    for name in ("execute", "executemany"):
        original = getattr(psycopg.Cursor, name)

        def timed(self, query, *args, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            started = time.perf_counter()
            try:
                return _original(self, query, *args, **kwargs)
            finally:
                took = time.perf_counter() - started
                with _lock:
                    LOG.append((threading.current_thread().name, kind(query), took))
        setattr(psycopg.Cursor, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("space")
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    embedder = make_embedder()
    hub = HubStore(args.url, args.space)
    memory = Memory(hub, embedder, project="/home/dev/src/project-a")
    asked = queries(args.queries + 5)
    for text, depth in asked[:5]:
        memory.query(text, depth=depth)
    instrument()
    took = []
    for text, depth in asked[5:]:
        started = time.perf_counter()
        memory.query(text, depth=depth)
        took.append(time.perf_counter() - started)
    memory.close()
    hub.close()
    n = len(took)
    by: dict[str, list[float]] = collections.defaultdict(list)
    for _thread, k, s in LOG:
        by[k].append(s)
    rows = sorted(by.items(), key=lambda kv: -sum(kv[1]))
    print(table(f"statements of {n} hub queries ({args.space}); query p50 "
                f"{1000 * statistics.median(took):.1f} ms, {len(LOG) / n:.1f} statements a query",
                ["statement", "per query", "p50 ms", "ms per query"],
                [[k[:80], f"{len(v) / n:.2f}", f"{1000 * statistics.median(v):.2f}",
                  f"{1000 * sum(v) / n:.2f}"] for k, v in rows]))


if __name__ == "__main__":
    main()
