"""Ingestion throughput and transcript parsing speed.

- parsing: real Claude Code 2.1.197 transcript lines (tests/fixtures), repeated into a large
  file, read by read_delta (turns) and count_turns_fast (the Stop hook's check), in MB/s;
- ingestion: a session transcript ingested end to end (parse, redact, extract, match topics,
  embed with the real model, one transaction per batch) with an instant in-process fake LLM
  that returns 1 topic, 3 concepts and 8 facts per concept for every batch; fragments/s.

    python bench/bench_ingest.py [--mb 50] [--turns 400] [--json bench/results/ingest.json]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from common import ROOT, table, write_json

from lore_plugin.capture.ingest import Ingestor
from lore_plugin.capture.transcript import count_turns_fast, read_delta
from lore_plugin.core.config import Settings
from lore_plugin.embedding.embedder import LocalEmbedder
from lore_plugin.llm.client import FakeLLM
from tests.transcripts import TranscriptWriter

FIXTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.197"


def big_transcript(path: Path, megabytes: float) -> int:
    lines = b"".join(p.read_bytes() for p in sorted(FIXTURES.glob("real_*.jsonl")))
    with open(path, "wb") as fh:
        while fh.tell() < megabytes * 1e6:
            fh.write(lines)
    return path.stat().st_size


def parse_speed(path: Path, size: int, runs: int = 3) -> dict[str, float]:
    full, fast = [], []
    for _ in range(runs):
        started = time.perf_counter()
        delta = read_delta(path, 0)
        full.append(time.perf_counter() - started)
        started = time.perf_counter()
        count_turns_fast(path, 0)
        fast.append(time.perf_counter() - started)
    return {"read_delta_mb_s": round(size / 1e6 / statistics.median(full), 1),
            "count_turns_fast_mb_s": round(size / 1e6 / statistics.median(fast), 1),
            "turns": len(delta.turns), "mb": round(size / 1e6, 1)}


def extraction(prompt: str, **_: object) -> dict:
    """24 facts under 3 concepts, worded from the batch so every batch adds new knowledge."""
    rules = re.findall(r"rule (\d+) uses value (\d+)", prompt)
    facts = [{"summary": f"billing rule {n} uses value {v} (variant {k})", "importance": "medium",
              "content": f"In this project billing rule {n} is set to {v}; variant {k} applies."}
             for n, v in rules for k in range(3)][:24]
    concepts = [{"name": f"Billing rule group {i}", "summary": "rule values", "importance": "medium",
                 "facts": facts[i * 8:(i + 1) * 8]} for i in range(3)]
    return {"topics": [{"name": "Billing rules", "summary": "rules", "importance": "high",
                        "concepts": [c for c in concepts if c["facts"]]}]}


def ingest_speed(tmp: Path, turns: int) -> dict[str, float]:
    writer = TranscriptWriter(tmp / "session.jsonl")
    writer.exchange(turns)
    settings = Settings(db_path=tmp / "memory.db", home=tmp / "home", batch_bytes=12_000,
                        max_requests_per_hour=1_000_000)
    embedder = LocalEmbedder(Path.home() / ".cache" / "lore-tests" / "models", threads=None)  # as the worker
    embedder.embed(["warm up"])
    llm = FakeLLM(default=lambda **call: extraction(call["prompt"]))
    ingestor = Ingestor(settings, llm, embedder)
    started = time.perf_counter()
    report = ingestor.ingest(writer.path)
    took = time.perf_counter() - started
    return {"fragments": report.fragments, "batches": report.batches, "seconds": round(took, 2),
            "fragments_per_s": round(report.fragments / took, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.jsonl"
        parsing = parse_speed(big, big_transcript(big, args.mb))
        ingest = ingest_speed(Path(tmp), args.turns)
    print(table(f"Transcript parsing ({parsing['mb']} MB of real 2.1.197 lines)",
                ["reader", "MB/s", "target"],
                [["read_delta (turns)", parsing["read_delta_mb_s"], "≥ 50"],
                 ["count_turns_fast (Stop hook)", parsing["count_turns_fast_mb_s"], ""]]))
    print(table("Ingestion with an instant fake LLM (real model, real database)",
                ["fragments", "batches", "seconds", "fragments/s", "target"],
                [[ingest["fragments"], ingest["batches"], ingest["seconds"],
                  ingest["fragments_per_s"], "≥ 200"]]))
    write_json(args.json, "ingest", {"parsing": parsing, "ingestion": ingest})


if __name__ == "__main__":
    main()
