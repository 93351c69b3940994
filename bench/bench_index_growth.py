"""The memory service's RSS while stores append to a large vector index (issue 27).

    python bench/bench_index_growth.py --db bench/.cache/bench-100000-v1.db --base /tmp/base \
        [--runs 2] [--stores 32 200] [--json PATH]

Each run starts the real service (`python -m lore_plugin.service`, started by its client) on
a fresh copy of bench_server.py's synthetic database, with the vector snapshot beside it (the
service writes one at its first start; this script makes it once, with this checkout's code,
before the runs), waits until it is warm, asks 40 `query_memory` (their latency, through the
client), then stores one fragment at a time with `store_memory` and reads VmHWM (peak) and
VmRSS of the service from /proc after warm-up, the queries and each count of stores in
`--stores` (after 3 s idle, when provisional vectors are replaced), then 40 queries again
(searched with the appended rows). Runs of `--base` (another
checkout, e.g. `git worktree add --detach /tmp/base main`) and of this checkout alternate.

    python bench/bench_index_growth.py --search DB

times `VectorIndex.search` in-process (this checkout) at DB's size with and without a tail of
200 appended rows, against the same rows as one array (see `search_times`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ["postgres vacuum settings", "how do we deploy to kubernetes", "react state management",
           "rust tokio runtime", "python packaging wheels", "ci pipeline cache",
           "terraform state lock", "tracing spans", "session cookies", "release checklist"]


def child(db: str, work: str, stores: list[int]) -> None:
    """One service's life, in a process whose PYTHONPATH picks the code; one JSON line."""
    from lore_plugin.recall.prompt_socket import exchange
    from lore_plugin.service.client import ServiceClient

    home = os.path.join(work, "home")
    client = ServiceClient(home, db, "/home/dev/src/project-a", wait=300)
    pid = client.request("status")["pid"]
    started = time.monotonic()
    while not client.request("status")["warm"] and time.monotonic() - started < 900:
        time.sleep(0.5)

    def memory() -> dict[str, float]:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                      .splitlines())
        return {k: round(int(fields[k].split()[0]) / 1024, 1) for k in ("VmHWM", "VmRSS")}

    def query_p50_ms() -> float:
        times = []
        for i in range(40):
            begun = time.perf_counter()
            client.request("tool", {"name": "query_memory",
                                    "arguments": {"topic": QUERIES[i % 10], "depth": 2}})
            times.append(time.perf_counter() - begun)
        return round(statistics.median(times) * 1000, 1)

    out: dict = {"warm_s": round(time.monotonic() - started, 1), "warm": memory()}
    out["query_p50_ms"] = query_p50_ms()
    out["after_40_queries"] = memory()
    done = 0
    for target in stores:
        for i in range(done, target):
            client.request("tool", {"name": "store_memory", "arguments": {
                "content": f"The deploy job for service {i} retries {i % 5 + 2} times before "
                           f"paging the on-call engineer.",
                "summary": f"Deploy retries for service {i}"}})
        done = target
        time.sleep(3)
        out[f"after_{target}_stores"] = memory()
    out["query_p50_ms_after_stores"] = query_p50_ms()  # searched with the appended rows
    out["after_queries_after_stores"] = memory()
    info = json.loads((Path(home) / "run" / "service.json").read_text())
    exchange(info, {"op": "drain"}, time.monotonic() + 10)
    client.close()
    print(json.dumps(out))


def search_times(db: Path, appended: int = 200, rounds: int = 5, queries: int = 200) -> dict:
    """In-process, this checkout: `VectorIndex.search` over the snapshot's index (no tail),
    the same after `appended` rows went into its tail, and those rows as one concatenated
    array (the old layout); rounds alternate, medians of per-round medians, in ms."""
    import numpy as np

    from lore_plugin.recall import search
    from lore_plugin.store import Store

    rng = np.random.default_rng(5)
    store = Store(db, readonly=True)
    index = search.VectorIndex(db.with_name(f"{db.name}-vectors"))
    index.refresh(store)
    store.close()
    assert index.matrix is not None and index.reduced is not None and index.basis is not None
    plain = search.VectorIndex()
    for name in ("ids", "rowids", "depths", "scales", "basis", "matrix", "reduced"):
        setattr(plain, name, getattr(index, name))
    extra = rng.standard_normal((appended, 384)).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    tailed = search.VectorIndex()
    quantized, scales = search._quantize(extra)
    tailed.ids = np.concatenate([index.ids, np.array([b"%032x" % i for i in range(appended)])])
    tailed.rowids = np.concatenate([index.rowids, np.arange(appended) + 10**9])
    tailed.depths = np.concatenate([index.depths, np.full(appended, 2, np.int16)])
    tailed.scales, tailed.basis = np.concatenate([index.scales, scales]), index.basis
    tailed.matrix, tailed.reduced = index.matrix, index.reduced
    for row in range(appended):  # one store at a time, as the service appends them
        tailed.matrix = tailed.matrix.appended(quantized[row:row + 1])
        tailed.reduced = tailed.reduced.appended(extra[row:row + 1] @ index.basis)
    joined = search.VectorIndex()
    for name in ("ids", "rowids", "depths", "scales", "basis"):
        setattr(joined, name, getattr(tailed, name))
    joined.matrix = search.Rows(tailed.matrix.whole())
    joined.reduced = search.Rows(tailed.reduced.whole())
    asked = rng.standard_normal((queries, 384)).astype(np.float32)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    medians: dict[str, list[float]] = {"no tail": [], "200-row tail": [], "one array": []}
    for _ in range(rounds):
        for name, idx in (("no tail", plain), ("200-row tail", tailed), ("one array", joined)):
            times = []
            for query in asked:
                begun = time.perf_counter()
                idx.search(query, 30, depth=2)
                times.append(time.perf_counter() - begun)
            medians[name].append(statistics.median(times) * 1000)
    same = all(tailed.search(q, 30, depth=2) == joined.search(q, 30, depth=2) for q in asked)
    return {**{k: round(statistics.median(v), 3) for k, v in medians.items()},
            "rounds": medians, "same_answers": same}


def run(code: Path, db: Path, stores: list[int]) -> dict:
    with tempfile.TemporaryDirectory(prefix="lore-growth-") as work:
        copy = Path(work) / "memory.db"
        shutil.copy(db, copy)
        snap = db.with_name(f"{db.name}-vectors")
        if snap.exists():
            shutil.copy(snap, copy.with_name(f"{copy.name}-vectors"))
        env = {**os.environ, "PYTHONPATH": str(code), "LORE_HOME": str(Path(work) / "home"),
               "LORE_DB_PATH": str(copy), "LORE_SERVICE": "on", "LORE_NO_DOWNLOAD": "1"}
        done = subprocess.run([sys.executable, __file__, "--child", str(copy), work,
                               *map(str, stores)], env=env, cwd=work, capture_output=True,
                              text=True, timeout=1800)
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--search"]:
        print(json.dumps(search_times(Path(sys.argv[2]))))
        return
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], [int(n) for n in sys.argv[4:]])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--stores", type=int, nargs="+", default=[32, 200])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    snap = args.db.with_name(f"{args.db.name}-vectors")
    if not snap.exists():  # the snapshot a service writes at its first start
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from lore_plugin.recall.search import refresh_snapshot; "
                        "print(refresh_snapshot(Path(sys.argv[1])))", str(args.db)],
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    results: dict[str, list[dict]] = {"base": [], "new": []}
    for i in range(args.runs):
        for name, code in (("base", args.base), ("new", ROOT)):
            results[name].append(run(code, args.db, args.stores))
            print(name, i + 1, json.dumps(results[name][-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
