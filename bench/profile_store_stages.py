"""Where a grouped store's time goes, stage by stage: one bench_store_rate.py measurement
(fresh process, model and index warm) with each stage of the group writer timed, CPU of
the thread that runs it (time.thread_time, which a loaded machine distorts less than the
clock) and wall time.

    PYTHONPATH=<checkout> python bench/profile_store_stages.py --callers 16 [--stores 96]

The checkout on PYTHONPATH is the one measured (this file works with main's too: a stage
its code lacks is left out). The stages are module attributes wrapped before the writer
starts; a stage inside another is listed under it ("in ...") and also counted there."""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_store_rate  # noqa: E402

# (label, module, attribute path, the stage it runs inside)
STAGES = [
    ("request parse (redact, time words)", "lore_plugin.recall.group_commit", "query_words", ""),
    ("model: placement queries (stage one)", "lore_plugin.recall.group_commit",
     "GroupWriter._embed_queries", ""),
    ("model: in the writer (lone queries, exact texts)", "lore_plugin.recall.group_view",
     "PrefilledEmbedder.prefill", ""),
    ("placement (the hybrid query)", "lore_plugin.recall.group_commit", "place_knowledge", ""),
    ("vector search, batched", "lore_plugin.recall.search", "VectorIndex.search_batch",
     "placement (the hybrid query)"),
    ("vector search, one query", "lore_plugin.recall.group_view", "BatchIndex.search_many",
     "placement (the hybrid query)"),
    ("keyword search", "lore_plugin.recall.memory", "Memory._keyword_search",
     "placement (the hybrid query)"),
    ("duplicate pre-check (may_repeat)", "lore_plugin.recall.storing", "may_repeat", ""),
    ("near-duplicate check", "lore_plugin.recall.storing", "near_duplicate", ""),
    ("insert (Memory.store)", "lore_plugin.recall.memory_writes", "Writes.store", ""),
    ("recontext (model + update)", "lore_plugin.recall.group_commit", "recontext", ""),
    ("index patch (VectorIndex.replace)", "lore_plugin.recall.search", "VectorIndex.replace",
     "recontext (model + update)"),
]
totals: dict[str, list[float]] = {}
_inside = threading.local()


def _wrap(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        running = getattr(_inside, "labels", set())
        if label in running:  # recursion: counted once, at the outermost call
            return fn(*args, **kwargs)
        running.add(label)
        _inside.labels = running
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = totals.setdefault(label, [0.0, 0.0, 0])
            spent[0] += time.thread_time() - cpu
            spent[1] += time.perf_counter() - wall
            spent[2] += 1
            running.discard(label)
    return timed


def _thread_cpu(run: Callable[[Any], None], name: str, into: dict[str, float]
                ) -> Callable[[Any], None]:
    def measured(self: Any) -> None:
        try:
            run(self)
        finally:
            into[name] = time.thread_time()
    return measured


def install() -> list[str]:
    missing = []
    for label, module_name, path, _ in STAGES:
        owner: Any = importlib.import_module(module_name)
        *outer, name = path.split(".")
        for part in outer:
            owner = getattr(owner, part, None)
        if owner is None or not hasattr(owner, name):
            missing.append(label)
            continue
        setattr(owner, name, _wrap(label, getattr(owner, name)))
    return missing


def model_cost(stores: int) -> None:
    """The model alone on the bench's texts: CPU and wall ms a text by batch size and
    onnxruntime threads (LocalEmbedder's own settings otherwise), and their token counts."""
    from lore_plugin.embedding.embedder import LocalEmbedder
    from lore_plugin.recall.memory_base import embedding_text

    work = bench_store_rate.work_items(stores, 0)
    texts = {"placement query": [f"{s}\n{c}" for c, s in work],
             "text under its parent": [embedding_text(s, c, "Billing timeout is 100 (review 0)")
                                       for c, s in work]}
    print("| texts | mean tokens | onnxruntime threads | batch | CPU ms a text | wall ms a text |")
    print("|---|---|---|---|---|---|")
    for threads in (1, 2):
        embedder = LocalEmbedder(bench_store_rate.model_cache(), threads=threads)
        embedder.embed(["warm up"])
        model = embedder._model  # noqa: SLF001 - its tokenizer, to count tokens
        for kind, batch_texts in texts.items():
            tokens = sum(len(e.ids) for e in model.tokenizer.encode_batch(batch_texts))  # type: ignore[union-attr]
            for size in (1, 16, 64):
                cpu, wall = time.process_time(), time.perf_counter()
                for start in range(0, len(batch_texts), size):
                    embedder.embed(batch_texts[start:start + size])
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                print(f"| {kind} | {tokens / len(batch_texts):.1f} | {threads} | {size} | "
                      f"{cpu / len(batch_texts) * 1000:.2f} | {wall / len(batch_texts) * 1000:.2f} |")
    print(f"load {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", action="store_true", help="the model's cost alone")
    parser.add_argument("--callers", type=int, default=16)
    parser.add_argument("--stores", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--seed", type=Path, help="a seeded database (made if not given)")
    args = parser.parse_args()
    if args.model:
        model_cost(args.stores)
        return
    work = Path(tempfile.mkdtemp(prefix="lore-stages-"))
    try:
        seed = args.seed
        if seed is None:
            seed = work / "seed.db"
            bench_store_rate.child_seed(seed)
        db = work / "run.db"
        shutil.copy(seed, db)
        missing = install()
        threads: dict[str, float] = {}
        from lore_plugin.recall import group_commit

        for name in ("_run", "_run_embedding"):  # each thread's CPU, up to its end
            setattr(group_commit.GroupWriter, name,
                    _thread_cpu(getattr(group_commit.GroupWriter, name), name, threads))
        out = bench_store_rate.child_measure(db, "grouped", args.callers, args.stores,
                                             args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out.pop("decisions", None)
    n = args.stores
    print(json.dumps({**out, "load": round(os.getloadavg()[0], 1),
                      "thread_cpu_s": {k: round(v, 2) for k, v in threads.items()}}))
    print(f"| stage ({args.callers} callers, {n} stores) | CPU ms a store | wall ms a store "
          "| calls |")
    print("|---|---|---|---|")
    for label, _, _, parent in STAGES:
        if label in totals:
            cpu, wall, calls = totals[label]
            name = f"in {parent.split(' (')[0]}: {label}" if parent else label
            print(f"| {name} | {cpu / n * 1000:.2f} | {wall / n * 1000:.2f} | {calls} |")
    if missing:
        print("not in this checkout: " + ", ".join(missing))


if __name__ == "__main__":
    main()
