"""The hub's query time as one space grows past the embedded base (issue 28's growth curve).

    python bench/bench_hub_growth.py --sizes 100000 200000 300000 --queries 300 --json F

Embedding 300K texts takes too long on this machine, so the space grows from bench_server.py's
100K memory (real MiniLM vectors, cached in bench/.cache) by perturbed copies of its facts:
each new fact takes a random base fact A (its vector, project, importance, dates, parent
concept) and a second random base fact B; its summary is A's, its content "A's summary; also,
B's summary." (as the base facts' content is built, so keyword search sees the same term
statistics), its vector unit(A's vector + noise), the noise Gaussian with norm about --sigma
(0.3: cosine about 0.96 to A's), and a hierarchical edge ties it to A's concept. Topics and
concepts stay the base's, so a concept's branch grows.

The base is pushed into a space of a throwaway PostgreSQL 18 + pgvector 0.8 (bench_hub.push,
what `lore hub push` runs); each growth step is loaded the same way (HubStore.bulk_load around
insert_rows, then ANALYZE) and imported into a copy of the SQLite file (Store.import_rows, as
`lore hub pull`). At each size the same queries (bench_server.py's first N) run on both, the
read path only (reinforce=False, so the space does not change between sizes), alternating
which goes first; p50 / p95 of each and the load average are reported."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hub import PUSH_BATCH, push  # noqa: E402
from bench_server import bench_db, copy_db, make_embedder, pct, queries, unit  # noqa: E402
from common import table, write_json  # noqa: E402

from lore_plugin.embedding.embedder import to_blob  # noqa: E402
from lore_plugin.hub import HubStore, dev, init_hub  # noqa: E402
from lore_plugin.recall.memory import Memory  # noqa: E402
from lore_plugin.store import Store  # noqa: E402

BASE = 100_000
PROJECT = "/home/dev/src/project-a"


class Grower:
    """Makes the new facts, deterministically (one seed), batch by batch."""

    def __init__(self, db: Path, sigma: float, seed: int = 28) -> None:
        store = Store(db, readonly=True)
        parent = {e["target"]: e["source"] for e in store.export_edges()
                  if e["kind"] == "hierarchical"}
        everything = list(store.export_fragments())
        self.base_ids = {f["id"] for f in everything}
        self.facts = [f for f in everything if f["depth"] == 2]
        store.close()
        self.parent = [parent[f["id"]] for f in self.facts]
        self.vectors = np.stack([np.frombuffer(f["embedding"], dtype=np.float32)
                                 for f in self.facts])
        self.edge_time = min(f["created_at"] for f in self.facts)
        self.sigma = sigma
        self.rng = random.Random(seed)
        self.nprng = np.random.default_rng(seed)

    def batches(self, count: int, size: int = PUSH_BATCH
                ) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
        for start in range(0, count, size):
            n = min(size, count - start)
            picks = [self.rng.randrange(len(self.facts)) for _ in range(n)]
            noise = self.nprng.standard_normal((n, self.vectors.shape[1])).astype(np.float32)
            vecs = unit(self.vectors[picks] + noise * (self.sigma / np.sqrt(noise.shape[1])))
            rows, edges = [], []
            for a, vec in zip(picks, vecs):
                b = self.facts[self.rng.randrange(len(self.facts))]
                row = dict(self.facts[a])
                row.update(id=uuid.UUID(int=self.rng.getrandbits(128)).hex,
                           content=f"{row['summary']}; also, {b['summary']}.",
                           embedding=to_blob(vec), superseded_by=None)
                rows.append(row)
                edges.append({"id": uuid.UUID(int=self.rng.getrandbits(128)).hex,
                              "source": self.parent[a], "target": row["id"],
                              "kind": "hierarchical", "weight": 1.0,
                              "created_at": self.edge_time})
            yield rows, edges


def grow(grower: Grower, count: int, url: str, space: str, sqlite: Path) -> dict[str, float]:
    hub, local = HubStore(url, space), Store(sqlite)
    sqlite_s = 0.0
    started = time.perf_counter()
    with hub.bulk_load(count):  # the hub's time includes the index build at its end
        for rows, edges in grower.batches(count):
            hub.insert_rows(rows, edges)
            t = time.perf_counter()
            local.import_rows(rows, edges, [])
            sqlite_s += time.perf_counter() - t
    hub._run("ANALYZE fragments")
    hub._run("ANALYZE edges")
    hub_s = time.perf_counter() - started - sqlite_s  # making the rows counts in, a little
    total = hub.count_fragments()
    hub.close()
    local.close()
    return {"added": count, "fragments": total, "hub_load_s": round(hub_s, 1),
            "sqlite_load_s": round(sqlite_s, 1)}


def measure(url: str, space: str, sqlite: Path, embedder, n: int,
            base_ids: set[str]) -> dict[str, float]:
    hub = HubStore(url, space)
    memories = {"sqlite": Memory(sqlite, embedder, project=PROJECT),
                "hub": Memory(hub, embedder, project=PROJECT)}
    asked = queries(n + 10)
    for text, depth in asked[:10]:  # warm both: the vector index load, the pool, the model
        for memory in memories.values():
            memory.query(text, depth=depth, reinforce=False)
    load_before = os.getloadavg()[0]
    took: dict[str, list[float]] = {name: [] for name in memories}
    grown = {name: [0, 0] for name in memories}  # answers that are grown facts, of all answers
    for i, (text, depth) in enumerate(asked[10:]):
        order = list(memories.items())
        for name, memory in order if i % 2 else order[::-1]:
            t = time.perf_counter()
            found = memory.query(text, depth=depth, reinforce=False).fragments
            took[name].append(time.perf_counter() - t)
            grown[name][0] += sum(s.fragment.id not in base_ids for s in found)
            grown[name][1] += len(found)
    for memory in memories.values():
        memory.close()
    hub.close()
    out = {"load_avg_start": round(load_before, 1), "load_avg_end": round(os.getloadavg()[0], 1)}
    for name, values in took.items():
        out[f"{name}_p50_ms"] = round(1000 * statistics.median(values), 1)
        out[f"{name}_p95_ms"] = round(1000 * pct(values, 95), 1)
        out[f"{name}_grown_share"] = round(grown[name][0] / max(1, grown[name][1]), 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 200_000, 300_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--sigma", type=float, default=0.3)
    parser.add_argument("--base", type=int, default=BASE, help="the embedded memory grown")
    parser.add_argument("--json")
    args = parser.parse_args()
    # a stop (timeout, kill PID) still runs the finally below, so the server does not outlive it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped"))
    embedder = make_embedder()
    base = bench_db(args.base, embedder, rebuild=False)
    folder = Path(tempfile.mkdtemp(prefix="lore-bench-growth-"))
    sqlite = folder / "memory.db"
    copy_db(base, sqlite)
    server = dev.start(folder / "pg")
    space = "bench-growth"
    results: dict[str, Any] = {"sigma": args.sigma, "queries": args.queries, "sizes": {}}
    try:
        init_hub(server.url)
        print(f"pushing the {args.base} base…", file=sys.stderr)
        results["base_push"] = push(base, server.url, space)
        print(f"  {results['base_push']}", file=sys.stderr)
        grower, size = Grower(base, args.sigma), args.base
        for target in sorted(args.sizes):
            row: dict[str, Any] = {}
            if target > size:
                print(f"growing to {target}…", file=sys.stderr)
                row.update(grow(grower, target - size, server.url, space, sqlite))
                size = target
            row.update(measure(server.url, space, sqlite, embedder, args.queries,
                               grower.base_ids))
            print(f"  {target}: {row}", file=sys.stderr)
            results["sizes"][target] = row
            write_json(args.json, "hub_growth", results)  # what is done survives a stop
    finally:
        dev.stop(folder / "pg")
        shutil.rmtree(folder, ignore_errors=True)
    rows = [[s, r["hub_p50_ms"], r["hub_p95_ms"], r["sqlite_p50_ms"], r["sqlite_p95_ms"],
             round(r["hub_p50_ms"] / r["sqlite_p50_ms"], 2), r.get("hub_load_s", ""),
             f"{r['load_avg_start']}-{r['load_avg_end']}"] for s, r in results["sizes"].items()]
    print(table(f"hub read path as the space grows ({args.queries} queries, alternating)",
                ["fragments", "hub p50", "hub p95", "SQLite p50", "SQLite p95", "hub/SQLite",
                 "hub load s", "load avg"], rows))


if __name__ == "__main__":
    main()
