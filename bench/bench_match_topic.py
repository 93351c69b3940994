"""What matching an extracted topic to an existing one costs (capture/known.match_topic), on a
SQLite memory of 1,500 topics with real MiniLM vectors, half of one project, half another.

    python bench/bench_match_topic.py build /tmp/m.db   # once
    python bench/bench_match_topic.py time /tmp/m.db    # with each checkout's code, alternating

`time` prints the median milliseconds of a call for three kinds of name, asked from the first
project: one it holds, one only the other project holds, one no topic has."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from lore_plugin.capture.known import match_topic
from lore_plugin.embedding.embedder import LocalEmbedder
from lore_plugin.recall.memory import Memory
from tests.conftest import MODEL_CACHE

PROJECTS = ("/work/atlas", "/work/lumen")
SUBJECTS = ["Kubernetes", "React", "Terraform", "Redis", "Kafka", "nginx", "Django", "Spark",
            "Billing", "Deploys", "Grafana", "Postgres", "Auth", "Search", "Payments"]


def build(db: Path) -> None:
    memory = Memory(db, LocalEmbedder(MODEL_CACHE))
    for i in range(100):
        for n, subject in enumerate(SUBJECTS):
            memory.project = PROJECTS[(i + n) % 2]
            memory.store(f"{subject} area {i}: what was decided", f"{subject} area {i}", depth=0)
    memory.close()


def timed(db: Path) -> str:
    memory = Memory(db, LocalEmbedder(MODEL_CACHE))
    memory.project = PROJECTS[0]
    rows = memory.writer.execute("SELECT summary, project FROM fragments WHERE depth = 0")
    kinds = {"its own": [s for s, p in rows if p == PROJECTS[0]][:30],
             "the other's only": [s for s, p in rows if p == PROJECTS[1]][:30],
             "nobody's": [f"Release train {i}" for i in range(30)]}
    match_topic(memory, "warm up", "warm up")
    out = []
    for kind, names in kinds.items():
        took = []
        for name in names:
            start = time.perf_counter()
            match_topic(memory, name, "what was decided")
            took.append(time.perf_counter() - start)
        out.append(f"{kind} {statistics.median(took) * 1000:.2f} ms")
    memory.close()
    return " | ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("step", choices=["build", "time"])
    parser.add_argument("db", type=Path)
    args = parser.parse_args()
    if args.step == "build":
        build(args.db)
    else:
        print(timed(args.db))


if __name__ == "__main__":
    main()
