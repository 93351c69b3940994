"""Where a warm server's memory goes (issue 27): RSS after each step of a server's start, in a
fresh process per run, for onnxruntime's allocator and thread settings and for index sizes.

    python bench/bench_memory.py [--runs 3] [--sizes 500 2000 100000] [--base DIR] [--json PATH]

Each run is a child process (`--child`) that takes the steps an MCP server takes, in its
order, and reads VmRSS (and at the end VmHWM, the peak) from /proc/self/status after each:
Python, numpy, the store (apsw), the MCP server module (mcp, pydantic, starlette), onnxruntime
and tokenizers, the tokenizer, the inference session (the model's weights), a first query's
embedding, a batch of 32 long texts (what a store or a backfill embeds), the vector index of
the database, then 40 queries through Memory.query. It also times the embedding of one query
and of a batch, and the queries, so that no setting saves memory by costing speed unseen.
Runs of different settings alternate. The databases are bench_server.py's synthetic ones
(cached in bench/.cache). The index's arrays are reported by component, with what float32,
float16 and int8 would take for them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (name, onnxruntime settings); the first is what a server runs with.
SETTINGS = {
    "shipped (arena off, patterns on, 1 thread)": {"arena": False, "mem_pattern": True,
                                                   "threads": 1},
    "arena on": {"arena": True, "mem_pattern": True, "threads": 1},
    "memory patterns off": {"arena": False, "mem_pattern": False, "threads": 1},
    "2 intra-op threads": {"arena": False, "mem_pattern": True, "threads": 2},
    "arena on, patterns off": {"arena": True, "mem_pattern": False, "threads": 1},
}
LONG = ("The deploy pipeline retries a failed migration three times with exponential backoff, "
        "then pages the on-call engineer and leaves the release tagged as blocked. ") * 6


def status_mb() -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def child(config: dict) -> None:
    """One server's start, step by step; prints one JSON line."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # as lore_plugin.server.main() does
    steps: list[tuple[str, float]] = [("python", status_mb()[0])]

    def step(name: str) -> None:
        steps.append((name, status_mb()[0]))

    import numpy as np
    step("numpy")
    from lore_plugin.store import Store
    step("store (apsw)")
    if config.get("server_module", True):  # a memory service without the MCP SDK skips it
        import lore_plugin.server  # noqa: F401
        step("server module (mcp, pydantic, starlette)")
    import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401
    step("onnxruntime + tokenizers imported")
    from lore_plugin.embedding.embedder import LocalEmbedder, find_model_dir

    folder = find_model_dir(Path(config["models"]))
    assert folder is not None, "no model"
    tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    step("tokenizer loaded")
    del tokenizer  # the model below loads its own
    try:
        embedder = LocalEmbedder(Path(config["models"]), threads=config["threads"],
                                 arena=config["arena"], mem_pattern=config["mem_pattern"])
    except TypeError:  # a checkout from before these switches: its shipped settings only
        assert not config["arena"] and config["mem_pattern"], "settings this code lacks"
        embedder = LocalEmbedder(Path(config["models"]), threads=config["threads"])
    assert embedder.available, embedder.failure
    step("session created (model weights)")
    embedder.embed(["retry policy timeouts"])
    step("one query embedded")
    embedder.embed([LONG] * 32)
    step("a batch of 32 long texts embedded")
    one, batch = [], []
    for _ in range(30):
        started = time.perf_counter()
        embedder.embed(["how do we roll back a failed deploy"])
        one.append(time.perf_counter() - started)
    for _ in range(2):
        started = time.perf_counter()
        embedder.embed([LONG] * 32)
        batch.append(time.perf_counter() - started)
    step("after 30 single and 2 batch embeddings")
    out: dict = {"embed_one_ms": statistics.median(one) * 1000,
                 "embed_batch32_ms": statistics.median(batch) * 1000}
    if config.get("db"):
        from bench_server import queries

        from lore_plugin.recall.memory import Memory

        memory = Memory(config["db"], embedder, project="/home/dev/src/project-a")
        store = Store(config["db"], readonly=True)
        try:
            memory.index.refresh(store)
        finally:
            store.close()
        step("vector index loaded")
        index = memory.index
        parts = {"matrix": None if index.matrix is None else index.matrix.base,
                 "reduced (PCA)": None if index.reduced is None else index.reduced.base,
                 "scales": index.scales,
                 "ids": index.ids, "rowids": index.rowids, "depths": index.depths}
        out["index"] = {k: [str(v.dtype), list(v.shape), v.nbytes] for k, v in parts.items()
                        if v is not None}
        times = []
        for text, depth in queries(40):
            started = time.perf_counter()
            memory.query(text, depth=depth, reinforce=False)
            times.append(time.perf_counter() - started)
        out["query_p50_ms"] = statistics.median(times) * 1000
        step("40 queries answered")
        memory.close()
    out["steps"] = steps
    out["peak_mb"] = status_mb()[1]
    out["loaded"] = sorted(m for m in ("anthropic", "pydantic", "mcp", "numpy", "apsw",
                                       "starlette", "uvicorn", "httpx") if m in sys.modules)
    del np
    print(json.dumps(out))


def run_child(config: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = f"{config.get('checkout', ROOT)}{os.pathsep}{ROOT / 'bench'}"
    out = subprocess.run([sys.executable, str(Path(__file__)), "--child", json.dumps(config)],
                         env=env, capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def medians(results: list[dict]) -> dict:
    names = [name for name, _ in results[0]["steps"]]
    rss = {name: statistics.median(r["steps"][i][1] for r in results)
           for i, name in enumerate(names)}
    out = {"rss_mb": rss, "peak_mb": statistics.median(r["peak_mb"] for r in results)}
    for key in ("embed_one_ms", "embed_batch32_ms", "query_p50_ms"):
        if key in results[0]:
            out[key] = statistics.median(r[key] for r in results)
    for key in ("index", "loaded"):
        if key in results[0]:
            out[key] = results[0][key]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="*", default=[500, 2000, 100000])
    parser.add_argument("--settings-size", type=int, default=2000,
                        help="the database size at which the onnxruntime settings are compared")
    parser.add_argument("--base", help="another checkout, run with its shipped settings too")
    parser.add_argument("--no-server-module", action="store_true",
                        help="skip the MCP server module, as a memory service would")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_server import CACHE, bench_db, make_embedder

    embedder = make_embedder()
    models = str(CACHE / "models")
    dbs = {size: str(bench_db(size, embedder, False)) for size in args.sizes}
    shipped = next(iter(SETTINGS.values()))
    shipped = {**shipped, "server_module": not args.no_server_module}
    jobs = {f"{size} fragments": {**shipped, "db": db, "models": models}
            for size, db in dbs.items()}
    jobs |= {f"{name} ({args.settings_size} fragments)": {**conf, "db": dbs[args.settings_size],
                                                          "models": models}
             for name, conf in list(SETTINGS.items())[1:] if args.settings_size in dbs}
    if args.base:
        jobs |= {f"[base] {size} fragments": {**shipped, "db": db, "models": models,
                                              "checkout": args.base}
                 for size, db in dbs.items()}
    results: dict[str, list[dict]] = {name: [] for name in jobs}
    for run in range(args.runs):  # alternating, so load changes hit every setting alike
        for name, config in jobs.items():
            results[name].append(run_child(config))
            print(f"run {run + 1}/{args.runs} {name}: peak "
                  f"{results[name][-1]['peak_mb']:.0f} MB", file=sys.stderr)
    summary = {name: medians(r) for name, r in results.items()}
    for name, s in summary.items():
        print(f"\n{name}: peak {s['peak_mb']:.1f} MB, embed one {s['embed_one_ms']:.2f} ms, "
              f"batch of 32 {s['embed_batch32_ms']:.0f} ms, query p50 "
              f"{s.get('query_p50_ms', float('nan')):.1f} ms; loaded {s['loaded']}")
        previous = 0.0
        for step, rss in s["rss_mb"].items():
            print(f"  {step:45s} {rss:7.1f} MB  (+{rss - previous:6.1f})")
            previous = rss
        for part, (dtype, shape, nbytes) in s.get("index", {}).items():
            print(f"  index {part:14s} {dtype:8s} {shape} {nbytes / 2**20:.1f} MB")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"bench": "memory", "runs": args.runs,
                                               "results": summary}, indent=2))


if __name__ == "__main__":
    main()
