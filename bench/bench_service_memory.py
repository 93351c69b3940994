"""What the memory service's peak RSS at 100K fragments is made of (issue 27).

    python bench/bench_service_memory.py --db DB --trace [--base DIR] [--runs 3] [--json PATH]

starts the real service (`python -m lore_plugin.service`, through its client) on a fresh copy
of DB and of its vector snapshot, and samples the service's /proc/PID/status every few
milliseconds from outside until it is warm: VmRSS split into RssAnon (the process's own
memory) and RssFile (mapped files: the snapshot, the model, libraries), and VmHWM, the peak.
It reports the peak, what RssAnon and RssFile were at the sample nearest it, the service's
warm-up log, then 40 `query_memory` (p50 through the client) and the top-10 ids of each bench
query, so that two checkouts can be compared for answers as well as memory. Runs of `--base`
(another checkout) and of this one alternate.

    python bench/bench_service_memory.py --db DB --steps [--runs 3] [--json PATH]

takes the service's warm-up steps one at a time in a fresh process (no threads, so each step's
cost is its own) and reads VmRSS, RssAnon, RssFile and VmHWM after each; tracemalloc's current
and peak Python allocations are read around the steps that allocate in Python.

    python bench/bench_service_memory.py --ort [--runs 3] [--json PATH]

compares onnxruntime's settings (arena, memory patterns, threads) in fresh processes, and

    python bench/bench_service_memory.py --db DB --dtype [--json PATH]

the reduced copy of the index in float16 and int8 against float32: size, search CPU, top 10.
`--no-snapshot` makes every traced start load its index from SQLite. Results: bench/README.md,
"The service's peak RSS at 100K, profiled".
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
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ["postgres vacuum settings", "how do we deploy to kubernetes", "react state management",
           "rust tokio runtime", "python packaging wheels", "ci pipeline cache",
           "terraform state lock", "tracing spans", "session cookies", "release checklist"]
FIELDS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")


def read_status(pid: int | str) -> dict[str, float]:
    """The FIELDS of /proc/PID/status, in MB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in FIELDS:
            out[name] = round(int(value.split()[0]) / 1024, 1)
    return out


class Sampler(threading.Thread):
    """Reads a process's status every `every` seconds; keeps the sample of the highest RSS."""

    def __init__(self, pid: int, every: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.top: dict[str, float] = {}
        self.samples = 0
        self.stop = threading.Event()

    def run(self) -> None:
        begun = time.monotonic()
        while not self.stop.is_set():
            try:
                now = read_status(self.pid)
            except (OSError, ValueError):
                return
            self.samples += 1
            if now.get("VmRSS", 0) > self.top.get("VmRSS", -1):
                self.top = {**now, "at_s": round(time.monotonic() - begun, 2)}
            time.sleep(self.every)


def trace_child(db: str, work: str, snapshot: bool) -> None:
    """Two lives of a service in one home, each watched from outside: the first start, which
    also prepares the model's optimised copy (embedder.optimized_model), and a later start,
    which finds it. Without `snapshot` each life starts with no vector snapshot (it loads the
    index from SQLite and writes one). Prints one JSON line."""
    lives = {}
    for life in ("first_start", "later_start"):
        if not snapshot:
            Path(f"{db}-vectors").unlink(missing_ok=True)
        lives[life] = one_life(db, work)
    print(json.dumps(lives))


def one_life(db: str, work: str) -> dict:
    """A service started, warm, 40 queries, drained."""
    from lore_plugin.recall.prompt_socket import exchange
    from lore_plugin.service.client import ServiceClient

    home = os.path.join(work, "home")
    client = ServiceClient(home, db, "/home/dev/src/project-a", wait=300)
    pid = client.request("status")["pid"]
    sampler = Sampler(pid)
    sampler.start()
    started = time.monotonic()
    while not client.request("status")["warm"] and time.monotonic() - started < 900:
        time.sleep(0.2)
    time.sleep(1)
    sampler.stop.set()
    sampler.join()
    out: dict = {"warm_s": round(time.monotonic() - started, 1), "peak_sample": sampler.top,
                 "samples": sampler.samples, "warm": read_status(pid)}
    times, tops = [], {}
    for i in range(40):
        begun = time.perf_counter()
        answer = client.request("tool", {"name": "query_memory",
                                         "arguments": {"topic": QUERIES[i % 10], "depth": 2}})
        times.append(time.perf_counter() - begun)
        tops[QUERIES[i % 10]] = answer_ids(answer)
    out["query_p50_ms"] = round(statistics.median(times) * 1000, 1)
    out["after_40_queries"] = read_status(pid)
    for topic in varied_topics(200):  # longer use: more of the snapshot's rows are read
        client.request("tool", {"name": "query_memory",
                                "arguments": {"topic": topic, "depth": 2}})
    out["after_200_varied"] = read_status(pid)
    out["rss_by_mapping"] = rss_by_mapping(pid)
    out["top10"] = tops
    logs = Path(home) / "logs"
    out["log"] = [line.split(" ", 3)[-1] for f in sorted(logs.glob("service*.log"))
                  for line in f.read_text().splitlines()
                  if f" {pid} " in line and ("warm" in line or "snapshot" in line)]
    info = json.loads((Path(home) / "run" / "service.json").read_text())
    exchange(info, {"op": "drain"}, time.monotonic() + 10)
    client.close()
    for _ in range(200):  # gone, lock and announcement with it, before the next life
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.05)
    return out


def rss_by_mapping(pid: int | str, top: int = 14) -> dict[str, float]:
    """RSS in MB by what is mapped (a file's name, or [heap], [anon] and the like), the
    largest `top`, from /proc/PID/smaps."""
    totals: dict[str, float] = {}
    name = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
            name = os.path.basename(parts[5]) if len(parts) > 5 else "[anon]"
        elif parts and parts[0] == "Rss:":
            totals[name] = totals.get(name, 0.0) + int(parts[1]) / 1024
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])
    return {k: round(v, 1) for k, v in ranked[:top]} | {
        "(the rest)": round(sum(v for _, v in ranked[top:]), 1)}


def answer_ids(answer: object) -> list[str]:
    """The fragment ids in a query_memory answer, in order (the first ten)."""
    import re

    return re.findall(r"\b[0-9a-f]{32}\b", json.dumps(answer))[:10]


def in_child(code: Path, db: Path, snapshot: bool, prefix: str, mode: str, *extra: str,
             service: bool = False) -> dict:
    """This script run as `mode` (--trace-child, --steps-child) in a fresh process on a copy
    of the database (and its snapshot, when asked), under `code`; its last line of JSON."""
    with tempfile.TemporaryDirectory(prefix=prefix) as work:
        copy = Path(work) / "memory.db"
        shutil.copy(db, copy)
        snap = db.with_name(f"{db.name}-vectors")
        if snapshot and snap.exists():
            shutil.copy(snap, copy.with_name(f"{copy.name}-vectors"))
        env = {**os.environ, "PYTHONPATH": str(code), "LORE_HOME": str(Path(work) / "home"),
               "LORE_DB_PATH": str(copy), "LORE_NO_DOWNLOAD": "1"}
        if service:
            env["LORE_SERVICE"] = "on"
        done = subprocess.run([sys.executable, __file__, mode, str(copy), work,
                               "snapshot" if snapshot else "sqlite", *extra],
                              env=env, cwd=work, capture_output=True, text=True, timeout=1800)
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        return json.loads(done.stdout.strip().splitlines()[-1])


def trace(code: Path, db: Path, snapshot: bool = True) -> dict:
    return in_child(code, db, snapshot, "lore-svcmem-", "--trace-child", service=True)


def reset_peak() -> None:
    """VmHWM back to the current RSS (Linux's clear_refs 5), so the next reading is the
    peak of one step."""
    Path("/proc/self/clear_refs").write_text("5")


def varied_topics(n: int) -> list[str]:
    """n query topics from the bench queries' words and a fixed set of others, so that a long
    run reads many different candidates (the snapshot's int8 rows are read per candidate)."""
    import random

    words = sorted({w for q in QUERIES for w in q.split()} | {
        "cache", "index", "latency", "retry", "budget", "schema", "migration", "token", "queue",
        "worker", "memory", "vector", "search", "deploy", "review", "test", "lint", "backup"})
    rng = random.Random(27)
    return [" ".join(rng.sample(words, 3)) for _ in range(n)]


def steps_child(db: str, work: str, snapshot: bool, traced: bool) -> None:
    """The service's warm-up steps one at a time, in its order; one JSON line."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # as the service's serve() does
    if traced:
        import tracemalloc

        tracemalloc.start()
    rows: list[dict] = []

    def step(name: str, began: float) -> None:
        now = read_status("self")
        row = {"step": name, **now, "s": round(time.perf_counter() - began, 2)}
        if traced:
            current, peak = tracemalloc.get_traced_memory()
            row["py_current"], row["py_peak"] = round(current / 2**20, 1), round(peak / 2**20, 1)
            tracemalloc.reset_peak()
        rows.append(row)
        reset_peak()

    began = time.perf_counter()
    step("python", began)
    began = time.perf_counter()
    import numpy  # noqa: F401

    step("numpy", began)
    began = time.perf_counter()
    from lore_plugin.embedding.embedder import LocalEmbedder
    from lore_plugin.recall.memory import Memory
    from lore_plugin.recall.prompt_socket import Listener  # noqa: F401
    from lore_plugin.service.answers import run_tool
    from lore_plugin.service.daemon import Daemon  # noqa: F401
    from lore_plugin.service.engine import Service
    from lore_plugin.service.ops import Ops  # noqa: F401
    from lore_plugin.store import Store

    step("Lore's service modules (apsw, the engine)", began)
    began = time.perf_counter()
    import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401

    step("onnxruntime and tokenizers imported", began)
    embedder = LocalEmbedder(Path(work) / "models")
    engine = Service(Memory(Path(db), embedder))
    began = time.perf_counter()
    embedder.prepare()
    step("the model's optimised copy made (first start only)", began)
    began = time.perf_counter()
    assert embedder.available, embedder.failure
    step("the model loaded from its copy (tokenizer, session)", began)
    began = time.perf_counter()
    embedder.embed(["warm up"])
    step("a first query embedded", began)
    began = time.perf_counter()
    store = Store(Path(db), readonly=True)
    engine.memory.index.refresh(store)
    store.close()
    step("the vector index loaded" + (" from the snapshot" if snapshot else " from SQLite"),
         began)
    began = time.perf_counter()
    engine._save_snapshot()
    step("the snapshot written (when missing or behind)", began)
    began = time.perf_counter()
    with engine.lock:
        engine.memory.search("warm up", limit=1, mode="vector")
    step("the warm-up's search", began)
    topics = varied_topics(400)
    began = time.perf_counter()
    for topic in QUERIES * 4:
        run_tool(engine, "query_memory", {"topic": topic, "depth": 2}, None)
    step("40 query_memory (the bench queries)", began)
    began = time.perf_counter()
    for topic in topics:
        run_tool(engine, "query_memory", {"topic": topic, "depth": 2}, None)
    step("400 more, varied", began)
    index = engine.memory.index
    arrays = {}
    for name in ("ids", "rowids", "depths", "scales", "basis", "matrix", "reduced"):
        value = getattr(index, name)
        base = getattr(value, "base", value) if name in ("matrix", "reduced") else value
        mapped = isinstance(getattr(base, "base", None), (memoryview, type(None))) is False
        arrays[name] = {"MB": round(base.nbytes / 2**20, 1), "dtype": str(base.dtype),
                        "mapped": mapped and not base.flags.owndata}
    engine.close()
    print(json.dumps({"steps": rows, "arrays": arrays, "peak": read_status("self")}))


def dtype_trial(db: Path, rounds: int = 5) -> dict:
    """The reduced copy (the first pass over every row) in other dtypes, in-process on DB's
    snapshot: its size, the CPU time of a search (`VectorIndex.search(k=10, depth=2)`, median
    over the queries, then over `rounds` alternating rounds) and the top 10 it gives against
    float32's, on the bench queries and 200 varied ones."""
    import numpy as np

    from lore_plugin.embedding.embedder import LocalEmbedder
    from lore_plugin.recall import search
    from lore_plugin.store import Store

    store = Store(db, readonly=True)
    index = search.VectorIndex(db.with_name(f"{db.name}-vectors"))
    index.refresh(store)
    store.close()
    assert index.reduced is not None and index.basis is not None
    embedder = LocalEmbedder(ROOT / "bench" / ".cache" / "models")
    if not embedder.available:
        embedder = LocalEmbedder(Path(tempfile.mkdtemp(prefix="lore-models-")))
    asked = embedder.embed(QUERIES + varied_topics(200))
    reduced = np.asarray(index.reduced.base)

    class Chunked(search.Rows):
        """Stored in a small dtype, multiplied in float32 a block at a time."""

        def __matmul__(self, other: np.ndarray) -> np.ndarray:
            out = np.empty(len(self.base), dtype=np.float32)
            for start in range(0, len(self.base), 8192):
                out[start:start + 8192] = (self.base[start:start + 8192].astype(np.float32)
                                           @ other)
            return out * self.scale if self.scale is not None else out

    def variant(kind: str) -> search.VectorIndex:
        other = search.VectorIndex()
        for name in ("ids", "rowids", "depths", "scales", "basis", "matrix", "_epoch"):
            setattr(other, name, getattr(index, name))
        if kind == "float32 (shipped)":
            other.reduced = search.Rows(reduced)
        elif kind == "float16, whole product":
            other.reduced = search.Rows(reduced.astype(np.float16))
        else:
            rows = Chunked(reduced.astype(np.float16) if "float16" in kind
                           else np.round(reduced / np.abs(reduced).max() * 127).astype(np.int8))
            rows.scale = None if "float16" in kind else float(np.abs(reduced).max() / 127)
            other.reduced = rows
        return other

    kinds = ["float32 (shipped)", "float16, whole product", "float16, 8K-row blocks",
             "int8 (one scale), 8K-row blocks"]
    indexes = {kind: variant(kind) for kind in kinds}
    answers = {kind: [[fid for fid, _ in idx.search(q, 10, depth=2)] for q in asked]
               for kind, idx in indexes.items()}
    cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(rounds):
        for kind, idx in indexes.items():
            times = []
            for q in asked:
                begun = time.process_time()
                idx.search(q, 10, depth=2)
                times.append(time.process_time() - begun)
            cpu[kind].append(statistics.median(times) * 1000)
    shipped = answers["float32 (shipped)"]
    return {kind: {"reduced_MB": round(np.asarray(indexes[kind].reduced.base).nbytes / 2**20, 1),
                   "search_cpu_ms": round(statistics.median(cpu[kind]), 2),
                   "rounds_ms": [round(t, 2) for t in cpu[kind]],
                   "same_top10": sum(a == b for a, b in zip(answers[kind], shipped)),
                   "top10_overlap": round(statistics.mean(
                       len(set(a) & set(b)) / max(len(b), 1)
                       for a, b in zip(answers[kind], shipped)), 4),
                   "queries": len(asked)} for kind in kinds}


ORT_SETTINGS = {  # (arena, memory patterns, intra-op threads); the first is what Lore ships
    "shipped: arena off, patterns on, 1 thread": (False, True, 1),
    "arena on": (True, True, 1),
    "memory patterns off": (False, False, 1),
    "2 intra-op threads (inter-op too)": (False, True, 2),
}
LONG = ("The deploy pipeline retries a failed migration three times with exponential backoff, "
        "then pages the on-call engineer and leaves the release tagged as blocked. ") * 6


def ort_child(models: str, arena: bool, patterns: bool, threads: int) -> None:
    """One setting of onnxruntime, in a fresh process with the service's imports: RSS after
    the model's load, one query, a store's batch and a batch of 32 long texts; the peak; CPU
    time of one query's embedding and of that batch. One JSON line."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    import numpy  # noqa: F401

    from lore_plugin.embedding.embedder import LocalEmbedder

    out: dict = {}
    embedder = LocalEmbedder(Path(models), threads=threads, arena=arena, mem_pattern=patterns)
    assert embedder.available, embedder.failure
    out["model loaded"] = read_status("self")
    embedder.embed(["how do we roll back a failed deploy"])
    out["one query"] = read_status("self")
    embedder.embed([f"fact {i}: {LONG[:40 + 9 * i]}" for i in range(16)])
    out["a store's batch (16 mixed)"] = read_status("self")
    begun = time.process_time()
    embedder.embed([LONG] * 32)
    out["batch32_cpu_ms"] = round((time.process_time() - begun) * 1000)
    out["a batch of 32 long texts"] = read_status("self")
    times = []
    for _ in range(20):
        begun = time.process_time()
        embedder.embed(["how do we roll back a failed deploy"])
        times.append(time.process_time() - begun)
    out["query_cpu_ms"] = round(statistics.median(times) * 1000, 2)
    print(json.dumps(out))


def ort_settings(runs: int) -> dict:
    """Every setting `runs` times, alternating; a model cache prepared once beforehand."""
    models = Path(tempfile.mkdtemp(prefix="lore-ort-")) / "models"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LORE_NO_DOWNLOAD": "1"}
    subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from "
                    "lore_plugin.embedding.embedder import LocalEmbedder; "
                    "LocalEmbedder(Path(sys.argv[1])).prepare()", str(models)],
                   env=env, check=True, timeout=600)
    results: dict[str, list[dict]] = {name: [] for name in ORT_SETTINGS}
    for _ in range(runs):
        for name, (arena, patterns, threads) in ORT_SETTINGS.items():
            done = subprocess.run([sys.executable, __file__, "--ort-child", str(models),
                                   str(int(arena)), str(int(patterns)), str(threads)],
                                  env=env, capture_output=True, text=True, timeout=900)
            if done.returncode:
                raise SystemExit(done.stderr[-3000:])
            results[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(name, json.dumps(results[name][-1]), flush=True)
    shutil.rmtree(models.parent, ignore_errors=True)
    return results


def steps(code: Path, db: Path, snapshot: bool, traced: bool) -> dict:
    return in_child(code, db, snapshot, "lore-svcsteps-", "--steps-child",
                    "traced" if traced else "plain")


def main() -> None:
    if sys.argv[1:2] == ["--trace-child"]:
        trace_child(sys.argv[2], sys.argv[3], sys.argv[4] == "snapshot")
        return
    if sys.argv[1:2] == ["--ort-child"]:
        ort_child(sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1", int(sys.argv[5]))
        return
    if sys.argv[1:2] == ["--steps-child"]:
        steps_child(sys.argv[2], sys.argv[3], sys.argv[4] == "snapshot",
                    sys.argv[5] == "traced")
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--steps", action="store_true")
    parser.add_argument("--dtype", action="store_true")
    parser.add_argument("--ort", action="store_true", help="onnxruntime's settings")
    parser.add_argument("--no-snapshot", action="store_true",
                        help="trace: every start loads the index from SQLite")
    parser.add_argument("--base", type=Path)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.ort:
        settings = ort_settings(args.runs)
        if args.json:
            args.json.write_text(json.dumps(settings, indent=1))
        return
    if args.db is None:
        parser.error("--db is needed but with --ort")
    snap = args.db.with_name(f"{args.db.name}-vectors")
    if not snap.exists():  # the snapshot a service writes at its first start
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from lore_plugin.recall.search import refresh_snapshot; "
                        "print(refresh_snapshot(Path(sys.argv[1])))", str(args.db)],
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    if args.dtype:
        trial = dtype_trial(args.db)
        print(json.dumps(trial, indent=1))
        if args.json:
            args.json.write_text(json.dumps(trial, indent=1))
        return
    if args.steps:
        results_steps: dict[str, list[dict]] = {}
        for i in range(args.runs):
            for name, snapshot, traced in (("snapshot", True, False), ("sqlite", False, False),
                                           ("snapshot, tracemalloc", True, True)):
                if traced and i:
                    continue  # one traced run: tracemalloc's own cost makes RSS not comparable
                results_steps.setdefault(name, []).append(steps(ROOT, args.db, snapshot, traced))
                print(name, i + 1, json.dumps(results_steps[name][-1]), flush=True)
        if args.json:
            args.json.write_text(json.dumps(results_steps, indent=1))
        return
    checkouts = ([("base", args.base)] if args.base else []) + [("new", ROOT)]
    results: dict[str, list[dict]] = {name: [] for name, _ in checkouts}
    for i in range(args.runs):
        for name, code in checkouts:
            results[name].append(trace(code, args.db, not args.no_snapshot))
            shown = {life: {k: v for k, v in out.items() if k != "top10"}
                     for life, out in results[name][-1].items()}
            print(name, i + 1, json.dumps(shown), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
