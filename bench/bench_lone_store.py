"""Where a lone store_memory's time goes (issue 27): one caller, one fact at a time, the
writer idle at each, in-process as the service runs it. For each store: submit → journal
commit answered (`accepted`), → placed and committed (`placed`); and the writer's own
steps summed (GroupWriter.timings). `--root` runs another checkout's code (a base without the
journal: `placed` only). `--cues` gives each store five cues (issue 30; this checkout only).

    python bench/bench_lone_store.py [--stores 40] [--root /tmp/base-journalfinish] [--cues]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench_store_rate import PROJECT, SUBJECTS, fact, model_cache


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", type=int, default=40)
    parser.add_argument("--root", type=Path)
    parser.add_argument("--cues", action="store_true", help="five cues a store")
    args = parser.parse_args()
    if args.root:
        sys.path.insert(0, str(args.root))
    from lore_plugin.embedding.embedder import LocalEmbedder
    from lore_plugin.recall.group_commit import StoreRequest, group_writer
    from lore_plugin.recall.memory import Memory
    from lore_plugin.recall.storing import store_knowledge

    db = Path(tempfile.mkdtemp()) / "memory.db"
    memory = Memory(db, LocalEmbedder(model_cache()), project=PROJECT)
    for subject in range(len(SUBJECTS)):  # a seed to place against: 60 facts, 20 concepts
        for n in range(3):
            store_knowledge(memory, *fact(subject, n))
    memory.search("warm up", limit=1)
    writer = group_writer(memory)
    writer.submit(*fact(0, 999))  # the writer's threads and connections warm
    writer.timings = dict.fromkeys(writer.timings, 0.0)
    accepted_ms, placed_ms = [], []
    for i in range(args.stores):
        request = StoreRequest(*fact(i % len(SUBJECTS), 500 + i), project=PROJECT)
        if args.cues:
            request = replace(request, cues="\n".join(f"cue {k} of store {i}" for k in range(5)))
        began = time.perf_counter()
        if hasattr(writer, "accept"):
            accepted = writer.accept(request).result()
            accepted_ms.append((time.perf_counter() - began) * 1000)
            assert accepted.idle
            accepted.placed.result()
        else:  # the base: answered at placement
            writer.submit_request(request).result()
        placed_ms.append((time.perf_counter() - began) * 1000)
    memory.close()
    print(json.dumps({
        "root": str(args.root or "."), "stores": args.stores, "cues": args.cues,
        "accepted_p50_ms": round(statistics.median(accepted_ms), 2) if accepted_ms else None,
        "placed_p50_ms": round(statistics.median(placed_ms), 2),
        "placed_p90_ms": round(sorted(placed_ms)[int(len(placed_ms) * 0.9)], 2),
        "placed_mean_ms": round(statistics.fmean(placed_ms), 2),
        "writer_ms_a_store": {k: round(v * 1000 / args.stores, 2)
                              for k, v in writer.timings.items()}}))


if __name__ == "__main__":
    main()
