"""Tokens sent to the extraction LLM per 100 transcript turns, on the real Claude Code 2.1.197
transcripts (tests/fixtures, and ../shared/fixtures when present; identical files count once).

Each transcript is replayed line by line into a scratch file, as Claude Code writes it, and
ingested the way the hooks do: whenever batch_size user requests are pending (the Stop hook)
and once at the end (SessionEnd). The real Ingestor runs with the real embedding model; only
the LLM is an in-process recorder that answers with an empty extraction, so the figures are
what Lore would send, not what a model would answer. Each call's input is the system prompt,
the user message and the record_knowledge tool's JSON; tokens are estimated as characters /
3.5 (history.CHARS_PER_TOKEN, the estimate `lore ingest` prints), since no tokenizer for
Claude runs offline. The memory starts empty, or holding --topics existing topics (named from
a fixed vocabulary) that the prompt may list.

    python bench/bench_tokens.py [--topics 0,200] [--batch-size 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from common import ROOT, table, write_json

from lore_plugin.capture.ingest import Ingestor
from lore_plugin.capture.transcript import count_turns_fast, read_delta
from lore_plugin.core.config import Settings
from lore_plugin.embedding.embedder import LocalEmbedder
from lore_plugin.llm.client import FakeLLM
from lore_plugin.recall.memory import Memory

CHARS_PER_TOKEN = 3.5
FIXTURE_DIRS = [ROOT / "tests" / "fixtures" / "claude-code-2.1.197",
                ROOT.parent / "shared" / "fixtures" / "claude-code-2.1.197"]
SUBJECTS = ["Python packaging", "Rust async", "PostgreSQL", "Kubernetes", "React", "Terraform",
            "GitHub Actions", "SQLite", "Docker", "Redis", "GraphQL API", "Django", "FastAPI",
            "TypeScript", "Go services", "Kafka", "Spark", "Elasticsearch", "AWS IAM", "nginx"]
ASPECTS = ["build setup", "testing", "deployment", "performance tuning", "error handling",
           "configuration", "migrations", "logging", "security", "code style"]


def fixtures() -> list[Path]:
    seen, found = set(), []
    for folder in FIXTURE_DIRS:
        for path in sorted(folder.glob("real_*.jsonl")):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                found.append(path)
    return found


def seed_topics(db: Path, embedder: LocalEmbedder, count: int) -> None:
    memory = Memory(db, embedder)
    try:
        names = [f"{s} {a}" for a in ASPECTS for s in SUBJECTS][:count]
        for name in names:
            memory.store(f"{name}: what the developer decided and learnt about it.", name,
                         depth=0)
    finally:
        memory.close()


def replay(source: Path, scratch: Path, ingestor: Ingestor, batch_size: int) -> int:
    """Writes `source` into `scratch` line by line, ingesting as the hooks would; returns the
    transcript's turns."""
    scratch.write_bytes(b"")
    store_mark = 0
    with open(scratch, "ab") as out:
        for line in source.read_bytes().splitlines(keepends=True):
            out.write(line)
            out.flush()
            if count_turns_fast(scratch, store_mark) >= batch_size:
                ingestor.ingest(scratch)
                store_mark = scratch.stat().st_size
    ingestor.ingest(scratch)  # SessionEnd
    return sum(1 for t in read_delta(scratch, 0).turns if t.role != "tool")  # tool lines: evidence


def measure(topics: int, batch_size: int, embedder: LocalEmbedder) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []

    def answer(**call: Any) -> dict[str, Any]:
        calls.append(call)
        return {"topics": []}

    turns = 0
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "memory.db"
        seed_topics(db, embedder, topics)
        settings = Settings(db_path=db, home=Path(tmp), batch_size=batch_size)
        ingestor = Ingestor(settings, FakeLLM(default=answer), embedder)
        try:
            for index, path in enumerate(fixtures()):
                turns += replay(path, Path(tmp) / f"t{index}.jsonl", ingestor, batch_size)
        finally:
            ingestor.close()
    parts = {"system": sum(len(c["system"]) for c in calls),
             "prompt": sum(len(c["prompt"]) for c in calls),
             "tool": sum(len(json.dumps(c["tool"])) for c in calls)}
    chars = sum(parts.values())
    tokens = chars / CHARS_PER_TOKEN
    return {"existing_topics": topics, "transcripts": len(fixtures()), "turns": turns,
            "calls": len(calls), "chars": chars, **{f"{k}_chars": v for k, v in parts.items()},
            "tokens_per_100_turns": round(tokens * 100 / max(turns, 1)),
            "tokens_per_call": round(tokens / max(len(calls), 1))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", default="0,200", help="existing topics, comma-separated")
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--json")
    args = parser.parse_args()
    embedder = LocalEmbedder(Path.home() / ".cache" / "lore-tests" / "models")
    results = [measure(int(n), args.batch_size, embedder) for n in args.topics.split(",")]
    print(table("Extraction input per 100 transcript turns (estimated tokens = chars / 3.5)",
                ["existing topics", "turns", "calls", "system", "user msg", "tool", "tokens/100 turns",
                 "tokens/call"],
                [[r["existing_topics"], r["turns"], r["calls"], r["system_chars"],
                  r["prompt_chars"], r["tool_chars"], r["tokens_per_100_turns"],
                  r["tokens_per_call"]] for r in results]))
    write_json(args.json, "tokens", {"results": results, "batch_size": args.batch_size})


if __name__ == "__main__":
    main()
