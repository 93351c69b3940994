"""Consolidation benchmark (design §10): one sleep cycle over 100K fragments, LLM phases off.

    python bench/bench_consolidate.py [--topics 500] [--runs 3] [--json PATH] [--rebuild]

The database (built once, cached in bench/.cache/consolidate-<n>-v<layout>.db) holds a
realistic hierarchy with synthetic vectors: 500 topics x 10 concepts x 20 facts = 105,500
fragments, created over the past year, some recalled, 1% of the facts superseded, 1% of them
unimportant enough to forget, 5,000 associative edges of random weight, and topic vectors
built so that 10 pairs are near-duplicates (merged) and 20 pairs similar (linked). Random
normalised float32 vectors are enough here: consolidation reads stored vectors and never
embeds when the LLM phases are off.

Each run works on a fresh copy of the cached database, with "now" one day after it was built,
so every run does the same work: the first cycle after a day of use (relevance changes for
every fragment). Then the same copy consolidates again two hours later: the steady state.
Reported: the median of the runs, per phase and in total. Target: total <= 10 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np

from lore_plugin.consolidation.cycle import consolidate
from lore_plugin.core.config import Settings
from lore_plugin.core.relevance import MemoryState, relevance
from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.embedder import to_blob
from lore_plugin.store import Store

CACHE = ROOT / "bench" / ".cache"
LAYOUT_VERSION = 1  # bump when the synthetic layout changes, to rebuild the cached database
DAY = 86400.0
BUILT_AT = 1_750_000_000.0  # fixed, so every build and every run sees the same ages
CONCEPTS, FACTS = 10, 20
TARGET_S = 10.0
PHASES = ("relevance", "merge", "topic_links", "concept_links", "resummarise", "contradictions",
          "decay", "forget")


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def build_db(path: Path, n_topics: int) -> None:
    rng = np.random.default_rng(n_topics)
    started = time.perf_counter()
    tmp = path.with_suffix(".tmp")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    store = Store(tmp)
    topic_vecs = unit(rng.standard_normal((n_topics, 384)))
    for i in range(10):  # near-duplicates: cosine ~0.97
        topic_vecs[n_topics - 1 - i] = unit(topic_vecs[i] + 0.25 * unit(rng.standard_normal(384)))
    for i in range(10, 30):  # similar: cosine ~0.86
        topic_vecs[n_topics - 1 - i] = unit(topic_vecs[i] + 0.6 * unit(rng.standard_normal(384)))
    ids: list[str] = []
    states: dict[str, tuple[MemoryState, float]] = {}

    def add(summary: str, depth: int, vec: np.ndarray, parent: str | None,
            importance: float) -> str:
        created = BUILT_AT - float(rng.uniform(1, 365)) * DAY
        new = NewFragment(summary, summary, depth, importance=importance, created_at=created)
        fid = store.insert(new, created, to_blob(vec), parent)
        if rng.random() < 0.1:  # recalled a few times since
            count = int(rng.integers(1, 20))
            last = created + float(rng.uniform(0, BUILT_AT - created))
            decay = 0.02
            states[fid] = (MemoryState(count, decay, last, last),
                           relevance(importance, count, decay, last, BUILT_AT))
        ids.append(fid)
        return fid

    levels = (0.2, 0.5, 0.5, 0.9)
    with store.write():
        for t in range(n_topics):
            tid = add(f"topic {t}", 0, topic_vecs[t], None, 0.5)
            concept_vecs = unit(topic_vecs[t] + 0.8 * unit(rng.standard_normal((CONCEPTS, 384))))
            fact_vecs = unit(rng.standard_normal((CONCEPTS * FACTS, 384)))
            for c in range(CONCEPTS):
                cid = add(f"topic {t} concept {c}", 1, concept_vecs[c], tid, 0.5)
                previous = None
                for f in range(FACTS):
                    low = rng.random() < 0.01
                    importance = 0.01 if low else levels[int(rng.integers(0, 4))]
                    fid = add(f"topic {t} concept {c} fact {f}", 2, fact_vecs[c * FACTS + f],
                              cid, importance)
                    if previous and rng.random() < 0.01:
                        store.supersede(previous, fid, BUILT_AT - 30 * DAY)
                    previous = fid
        store.save_memory_states(states)
        for _ in range(5000):
            a, b = rng.choice(len(ids), 2, replace=False)
            store.link(ids[a], ids[b], "associative", float(rng.uniform(0.12, 0.9)), BUILT_AT)
    store.close()
    os.replace(tmp, path)
    print(f"  built {path.name}: {len(ids):,} fragments in {time.perf_counter() - started:.0f} s",
          file=sys.stderr)


def bench_db(n_topics: int, rebuild: bool) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    size = n_topics * (1 + CONCEPTS + CONCEPTS * FACTS)
    path = CACHE / f"consolidate-{size}-v{LAYOUT_VERSION}.db"
    if rebuild or not path.exists():
        build_db(path, n_topics)
    return path


def one_run(db: Path) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="lore-bench-"))
    try:
        work = home / "memory.db"
        shutil.copyfile(db, work)
        settings = Settings(db_path=work, home=home)
        now = [BUILT_AT + DAY]
        store = Store(work)
        first = consolidate(settings, store, lambda: now[0])
        now[0] += settings.consolidation_interval_secs
        second = consolidate(settings, store, lambda: now[0])
        check = store.integrity_check()
        store.close()
        assert check == ["ok"], check
        return {"first": first, "second": second}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def summarise(runs: list[dict[str, Any]], which: str) -> dict[str, Any]:
    reports = [r[which] for r in runs]
    out: dict[str, Any] = {"total_s": statistics.median(r["duration_s"] for r in reports)}
    out["phases_s"] = {p: statistics.median(r["phases"][p]["seconds"] for r in reports)
                       for p in PHASES}
    out["counts"] = {k: v for k, v in reports[0].items() if isinstance(v, int)
                     and not isinstance(v, bool)}
    out["runs_s"] = [r["duration_s"] for r in reports]
    return out


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=500, help="x 211 fragments each")
    parser.add_argument("--runs", type=int, default=3, help="runs (median reported)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--rebuild", action="store_true", help="regenerate the cached database")
    args = parser.parse_args()

    db = bench_db(args.topics, args.rebuild)
    store = Store(db, readonly=True)
    counts = store.counts()
    store.close()
    runs = []
    for i in range(args.runs):
        runs.append(one_run(db))
        print(f"  run {i + 1}: first cycle {runs[-1]['first']['duration_s']:.2f} s, "
              f"next cycle {runs[-1]['second']['duration_s']:.2f} s", file=sys.stderr)
    first, second = summarise(runs, "first"), summarise(runs, "second")
    print(f"\nconsolidation of {counts['fragments']:,} fragments ({counts['topics']} topics, "
          f"{counts['edges']:,} edges), LLM phases off; median of {args.runs} runs")
    print(f"  {'phase':16} {'first cycle':>12} {'next cycle':>12}")
    for phase in PHASES:
        a, b = first["phases_s"][phase], second["phases_s"][phase]
        print(f"  {phase:16} {a:>10.3f} s {b:>10.3f} s")
    verdict = "ok" if first["total_s"] <= TARGET_S else "OVER TARGET"
    print(f"  {'total':16} {first['total_s']:>10.3f} s {second['total_s']:>10.3f} s"
          f"   target <= {TARGET_S:.0f} s: {verdict}")
    c = first["counts"]
    print(f"  work in the first cycle: {c['relevance_updated']:,} relevance updates, "
          f"{c['topics_merged']} merges ({c['children_moved']} children moved), "
          f"{c['topic_links']} topic links, {c['concept_links']} concept links, "
          f"{c['edges_decayed']:,} edges decayed ({c['edges_pruned']} pruned), "
          f"{c['forgotten']} forgotten")
    result = {"machine": machine(), "database": counts, "runs": args.runs,
              "first_cycle": first, "next_cycle": second, "target_s": TARGET_S}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
