"""What consolidation's cue writing (consolidation/cue_writing.py) costs on the newuser set's
memory: its 120 notes stored through store_memory's path without cues
(prompt_cases.store_placed, as bench_prompt_recall's ask_newuser builds it), then the phase
run on a fresh copy of that file each time, the LLM faked at its seam answering at once with
four phrases a note, so the time is Lore's own (the due read, prompts, validation, writes).
Prints the phase's median time, its calls and prompt sizes; `--big DB` also times the due
read (Store.without_cues) on a copy of that database.

    python bench/cue_writing.py [--runs 5] [--cache /work/main/bench/.cache] [--big DB]"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import prompt_cases as pc  # noqa: E402
from bench_recall import CACHE, CachedEmbedder, load_newuser  # noqa: E402

from lore_plugin.consolidation.cue_writing import write_cues  # noqa: E402
from lore_plugin.embedding.embedder import LocalEmbedder  # noqa: E402
from lore_plugin.llm.client import FakeLLM  # noqa: E402
from lore_plugin.store import Store  # noqa: E402


def cuer(sizes: list[int]):
    """Four phrases for every note shown, recording each prompt's size."""
    def answer(*, system, prompt, tool, max_tokens):
        sizes.append(len(system) + len(prompt))
        shown = re.findall(r"^Note (n\d+):", prompt, re.MULTILINE)
        return {"notes": [{"id": i, "cues": [f"way {k} to ask {i}" for k in range(4)]}
                          for i in shown]}
    return answer


def copy_db(db: Path, to: Path) -> Path:
    """The database file with its write-ahead log: a copy without it misses the last writes."""
    for suffix in ("", "-wal"):
        if Path(f"{db}{suffix}").exists():
            shutil.copy(f"{db}{suffix}", f"{to}{suffix}")
    return to


def due_read(db: Path, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        copy = copy_db(db, Path(tmp) / db.name)
        store = Store(copy)
        try:
            for limit in (200, 20):
                times = []
                for _ in range(runs):
                    t = time.perf_counter()
                    store.without_cues(limit)
                    times.append((time.perf_counter() - t) * 1000)
                print(f"due read of {limit} on {store.count_fragments()} fragments: median "
                      f"{statistics.median(times):.2f} ms")
            with store.write():  # the worst case: every note has cues, nothing is due
                store.conn.execute("UPDATE fragments SET cues = 'x' WHERE depth >= 2")
            times = []
            for _ in range(runs):
                t = time.perf_counter()
                store.without_cues(200)
                times.append((time.perf_counter() - t) * 1000)
            print(f"due read when nothing is due (a scan of the live rows): median "
                  f"{statistics.median(times):.1f} ms")
        finally:
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=CACHE,
                        help="the bench cache holding models/ and recall-newuser/")
    parser.add_argument("--big", type=Path, help="a large bench database to time the due read on")
    args = parser.parse_args()
    corpus = load_newuser()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        vectors = folder / "embeddings.sqlite"  # a copy: the shared cache is never written
        if (args.cache / "recall-newuser" / "embeddings.sqlite").exists():
            shutil.copy(args.cache / "recall-newuser" / "embeddings.sqlite", vectors)
        embedder = CachedEmbedder(LocalEmbedder(args.cache / "models"), vectors)
        built = folder / "newuser.db"
        ids = pc.store_placed(corpus, built, embedder, projects=corpus.meta["projects"])
        store = Store(built, readonly=True)
        try:
            depths = [f.depth for f in store.get_many(list(ids), with_parent=False).values()]
        finally:
            store.close()
        print(f"{len(ids)} fragments hold the notes; at depth 2 and below: "
              f"{sum(d >= 2 for d in depths)}")
        times, calls, done, sizes = [], [], [], []
        for run in range(args.runs):
            copy = copy_db(built, folder / f"run{run}.db")
            store = Store(copy)
            try:
                llm = FakeLLM(default=cuer(sizes))
                t = time.perf_counter()
                outcome = write_cues(store, [], llm, now=corpus.now, dry_run=False)
                times.append(time.perf_counter() - t)
                calls.append(outcome.calls)
                done.append(outcome.done)
                assert not store.without_cues(1000)  # every note was given cues
            finally:
                store.close()
        print(f"newuser memory: {len(corpus.nodes)} notes; phase median "
              f"{statistics.median(times) * 1000:.1f} ms over {args.runs} runs "
              f"({', '.join(f'{t * 1000:.1f}' for t in times)}); {calls[0]} calls, "
              f"{done[0]} notes given cues; prompt chars (system + data) median "
              f"{statistics.median(sizes):.0f}, max {max(sizes)}")
    if args.big:
        due_read(args.big, args.runs)


if __name__ == "__main__":
    main()
