"""What reading cue vectors costs a query at 100K fragments (issue 30, cue path).

    python bench/bench_cue_search.py [--size 100000] [--queries 200] [--rounds 4]

Search ranks each candidate by the closer of its own vector and its closest cue phrase
(recall/cue_closeness.py), reading the candidates' cue vectors from SQLite. This copies
bench_server.py's synthetic database, gives every fact five cue phrases drawn from a pool of
2,000 real-model-embedded clauses (their vectors stored as the fill stores them), and times
Memory.query, alternating rounds with the cue vectors present and with the table emptied
(the same database, the same queries), so that the machine's noise falls on both alike.
Medians of the rounds' p50s and p95s are printed side by side."""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_server as bs  # noqa: E402

from lore_plugin.embedding.cue_vectors import encode  # noqa: E402
from lore_plugin.recall.memory import Memory  # noqa: E402

CUES_A_FACT = 5
POOL = 2000


def give_cues(memory: Memory, embedder, rng: random.Random) -> int:
    """Every fact (depth ≥ 2) gets CUES_A_FACT phrases and their vectors; returns how many."""
    pool = list(dict.fromkeys(bs.clause(rng) for _ in range(POOL * 2)))[:POOL]
    vectors = embedder.embed(pool)
    store = memory.writer
    ids = [row[0] for row in store.conn.execute(
        "SELECT id FROM fragments WHERE depth >= 2 AND superseded_by IS NULL")]
    picks = {fid: rng.sample(range(len(pool)), CUES_A_FACT) for fid in ids}
    with store.write():
        store.conn.executemany("UPDATE fragments SET cues = ? WHERE id = ?",
                               [("\n".join(pool[i] for i in p), fid) for fid, p in picks.items()])
    rows = [(fid, "\n".join(pool[i] for i in p), encode(vectors[p])) for fid, p in picks.items()]
    for start in range(0, len(rows), 5000):
        store.set_cue_vectors(rows[start:start + 5000])
    return len(rows)


def timed(memory: Memory, asked: list[tuple[str, int]]) -> list[float]:
    out = []
    for text, depth in asked:
        t = time.perf_counter()
        memory.query(text, depth=depth, reinforce=False)
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    embedder = bs.make_embedder()
    folder = Path(tempfile.mkdtemp(prefix="lore-bench-cuesearch-"))
    try:
        measure(args, embedder, folder / "memory.db")
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # a 100K copy with cues: over 1 GB


def measure(args: argparse.Namespace, embedder, work: Path) -> None:  # noqa: ANN001
    bs.copy_db(bs.bench_db(args.size, embedder, False), work)
    memory = Memory(work, embedder, project=bs.PROJECTS[0])
    started = time.perf_counter()
    given = give_cues(memory, embedder, random.Random(11))
    print(f"{given} facts given {CUES_A_FACT} cues each in {time.perf_counter() - started:.0f} s")
    blobs = memory.writer.conn.execute(
        "SELECT fragment_id, vectors FROM cue_vectors WHERE vectors IS NOT NULL").fetchall()
    asked = bs.queries(args.queries)
    timed(memory, asked[:20])  # the model, the index and the caches warm
    p50 = {"with": [], "without": []}
    p95 = {"with": [], "without": []}
    for _ in range(args.rounds):
        for side in ("with", "without"):
            with memory.writer.write():
                memory.writer.conn.execute("DELETE FROM cue_vectors")
                if side == "with":
                    memory.writer.conn.executemany(
                        "INSERT INTO cue_vectors (fragment_id, vectors) VALUES (?, ?)", blobs)
            got = timed(memory, asked)
            p50[side].append(1000 * statistics.median(got))
            p95[side].append(1000 * bs.pct(got, 95))
    memory.close()
    print(f"Memory.query at {args.size} fragments, {args.queries} queries x {args.rounds} "
          "alternating rounds (median of the rounds):")
    print("| cue vectors | p50 ms | p95 ms |\n|---|---|---|")
    for side in ("without", "with"):
        print(f"| {side} | {statistics.median(p50[side]):.1f} | "
              f"{statistics.median(p95[side]):.1f} |")


if __name__ == "__main__":
    main()
