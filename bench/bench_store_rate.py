"""store_memory throughput with 1, 4 and 16 concurrent callers: today's path (each store in
its own transaction, under the server's lock) beside group commit (recall/group_commit.py),
in one run, alternating.

    python bench/bench_store_rate.py --base /tmp/base-main [--rounds 3] [--stores 96]

`--base` is a checkout of the code to compare with (`git worktree add --detach /tmp/base-main
main`). Each measurement is a fresh child process on a copy of one seeded database (200 facts
under 20 concepts, stored through store_knowledge), with the model loaded and the index warm
before the clock starts. "today" calls the server's Service.call(store_knowledge) exactly as
the store_memory tool did; "grouped" calls group_writer(memory).submit as it does now. The
grouped runs also report where the writer's time went."""

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
SUBJECTS = ["billing", "search", "auth", "deploy", "cache", "queue", "mailer", "reports",
            "gateway", "scheduler", "storage", "metrics", "logging", "payments", "profiles",
            "uploads", "exports", "webhooks", "sessions", "alerts"]
ASPECTS = ["timeout", "retry limit", "port", "owner", "batch size", "region", "log level",
           "rate limit", "cron slot", "version", "quota", "replica count"]
PROJECT = "/work/bench-project"


def fact(subject: int, n: int) -> tuple[str, str]:
    name, aspect = SUBJECTS[subject % len(SUBJECTS)], ASPECTS[n % len(ASPECTS)]
    value = 100 + 7 * n + subject
    return (f"The {name} service's {aspect} is {value}; agreed with the team in review {n}.",
            f"{name.capitalize()} {aspect} is {value} (review {n})")


def model_cache() -> Path:
    return Path(os.environ.get("LORE_TEST_MODEL_CACHE",
                               Path.home() / ".cache" / "lore-tests" / "models"))


# -- the children: one measurement each, importing the code under --root -------------------
def child_seed(db: Path) -> None:
    from lore_plugin.embedding.embedder import LocalEmbedder
    from lore_plugin.recall.memory import Memory
    from lore_plugin.recall.storing import store_knowledge

    memory = Memory(db, LocalEmbedder(model_cache()), project=PROJECT)
    for subject in range(len(SUBJECTS)):
        for n in range(10):
            store_knowledge(memory, *fact(subject, n))
    memory.close()
    # Every row into the main file: the runs copy that file alone, and before this a copy
    # left what was still in the WAL behind (156 of the 202 rows).
    import sqlite3

    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def work_items(stores: int, repeats: int) -> list[tuple[str, str]]:
    """New facts about known subjects (new aspects and reviews), so placement finds a branch;
    with `repeats`, that many of them are replaced by facts the seed already holds, half
    word for word and half under a reworded summary (the vector's near-duplicate check)."""
    work = [fact(i % len(SUBJECTS), 1000 + i) for i in range(stores)]
    for r in range(min(repeats, stores)):
        content, summary = fact(r % len(SUBJECTS), r % 10)
        at = (r * stores) // max(repeats, 1)
        work[at] = (content, summary if r % 2 == 0 else summary.replace(" is ", ": ", 1))
    return work


def child_measure(db: Path, mode: str, callers: int, stores: int, repeats: int = 0) -> dict:
    from lore_plugin.embedding.embedder import LocalEmbedder
    from lore_plugin.recall.memory import Memory
    from lore_plugin.server.tools import Service

    memory = Memory(db, LocalEmbedder(model_cache()), project=PROJECT)
    service = Service(memory)
    assert memory.embedder_ready()
    memory.search("warm up", limit=1)  # the index and the model warm, as a served session is
    placing: list = []  # journal mode: each store's placement to come
    if mode == "today":
        from lore_plugin.recall.storing import store_knowledge

        def store(content: str, summary: str) -> object:
            return service.call(lambda m: store_knowledge(m, content, summary), True)
    elif mode == "journal":  # answered as store_memory answers (service/pending.py)
        from concurrent.futures import TimeoutError as Late

        from lore_plugin.recall.group_commit import StoreRequest, group_writer
        from lore_plugin.service.pending import QUICK_PLACE

        writer = group_writer(memory)

        def store(content: str, summary: str) -> object:
            accepted = writer.accept(StoreRequest(content, summary, project=PROJECT)).result()
            placing.append((summary, accepted.placed))
            if accepted.idle:
                try:
                    return accepted.placed.result(timeout=QUICK_PLACE)
                except Late:
                    pass
            return accepted
    else:
        from lore_plugin.recall.group_commit import group_writer

        writer = group_writer(memory)

        def store(content: str, summary: str) -> object:
            return writer.submit(content, summary)
    work = work_items(stores, repeats)
    latencies: list[float] = []
    answers: dict[str, tuple] = {}
    lock = threading.Lock()
    start = threading.Barrier(callers + 1)

    def caller() -> None:
        start.wait()
        while True:
            with lock:
                if not work:
                    return
                item = work.pop()
            began = time.perf_counter()
            got = store(*item)
            with lock:
                latencies.append(time.perf_counter() - began)
                if mode != "journal":
                    answers[item[1]] = _decision(got)

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for t in threads:
        t.start()
    start.wait()
    began, cpu = time.perf_counter(), time.process_time()
    cpu0 = cpu
    for t in threads:
        t.join()
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    for summary, placed in placing:  # the last placement: the sustained rate
        answers[summary] = _decision(placed.result(timeout=600))
    placed_s = time.perf_counter() - began
    out = {"mode": mode, "callers": callers, "stores": stores,
           "per_s": round(stores / elapsed, 1),
           # until the last store is placed (the same as answered, but in journal mode)
           "placed_per_s": round(stores / max(placed_s, elapsed), 1),
           "p50_ms": round(statistics.median(latencies) * 1000, 1),
           # CPU time of the whole process a store: what a loaded machine changes least
           "cpu_ms": round(cpu / stores * 1000, 1)}
    # What each store decided: where it went and whether it repeated a known fragment.
    out["decisions"] = answers
    if mode in ("grouped", "journal"):
        out["batches"] = round(statistics.mean(writer.batches), 1)
        out["model_calls"] = writer.model_calls
    # With one model run a store, the provisional vectors are replaced once the writer is
    # idle (recall/recontext.py): the time and CPU until none is left are the rest of the
    # work. (The base has no such marks: 0 at once.)
    began = time.perf_counter()
    from lore_plugin.store import Store

    watch = Store(db, readonly=True)  # one connection polled: opening one costs CPU too
    try:
        while (int(getattr(watch, "recontext_count", lambda: 0)())
               and time.perf_counter() - began < 600):
            time.sleep(0.05)
    finally:
        watch.close()
    out["drain_s"] = round(time.perf_counter() - began, 3)
    out["cpu_ms_with_drain"] = round((time.process_time() - cpu0) / stores * 1000, 1)
    service.close()
    if mode in ("grouped", "journal"):
        out["timings_s"] = {k: round(v, 3) for k, v in writer.timings.items()}
    return out


def _decision(stored: object) -> tuple:
    """(the parent's id, or "made" when levels were made for it; whether it repeated a
    known fragment; that fragment's id, or the new one's summary). Both sides copy one seed,
    so a seeded fragment has the same id in both."""
    frag, duplicate = stored.fragment, bool(stored.duplicate)  # type: ignore[attr-defined]
    return ("made" if stored.created else frag.parent_id,  # type: ignore[attr-defined]
            duplicate, frag.id if duplicate else frag.summary)


def child_profile(db: Path, stores: int) -> dict:
    """Where one store's time goes on the path it took before (one caller, store_knowledge):
    cumulative seconds in the model, placement's search, the near-duplicate check and the
    insert with its commit, from cProfile. Run on the base checkout."""
    import cProfile
    import pstats

    from lore_plugin.embedding.embedder import LocalEmbedder
    from lore_plugin.recall.memory import Memory
    from lore_plugin.recall.storing import store_knowledge

    memory = Memory(db, LocalEmbedder(model_cache()), project=PROJECT)
    assert memory.embedder_ready()
    memory.search("warm up", limit=1)
    work = [fact(i % len(SUBJECTS), 1000 + i) for i in range(stores)]
    profile = cProfile.Profile()
    began = time.perf_counter()
    profile.enable()
    for item in work:
        store_knowledge(memory, *item)
    profile.disable()
    elapsed = time.perf_counter() - began
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]

    def cumulative(module: str, name: str) -> float:
        return sum(v[3] for (path, _, func), v in stats.items()
                   if path.endswith(module) and func == name)

    model = cumulative("embedding/embedder.py", "embed") / 2  # LocalEmbedder and its model
    place = cumulative("recall/storing.py", "_place")
    out = {"stores": stores, "ms_per_store": round(elapsed / stores * 1000, 2),
           "model_ms": round(model / stores * 1000, 2),
           # placement's query is one of a store's two model calls
           "placement_search_ms": round((place - model / 2) / stores * 1000, 2),
           "duplicate_check_ms": round(cumulative("recall/storing.py", "near_duplicate")
                                       / stores * 1000, 2),
           "insert_and_commit_ms": round(cumulative("recall/memory_writes.py", "store")
                                         / stores * 1000, 2)}
    texts = [f"{s}\n{c}" for c, s in work[:32]]
    memory.embedder.embed(texts[:4])  # type: ignore[union-attr]
    for size in (1, 16):
        began = time.perf_counter()
        for start in range(0, 32, size):
            memory.embedder.embed(texts[start:start + size])  # type: ignore[union-attr]
        out[f"model_texts_per_s_batch_{size}"] = round(32 / (time.perf_counter() - began), 1)
    memory.close()
    return out


# -- the parent ----------------------------------------------------------------------------
def run_child(root: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(root)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # as the server sets them
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--root", str(root),
                           *args], env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"child failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", type=Path, help="checkout of the code to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stores", type=int, default=96)
    parser.add_argument("--callers", default="1,4,16")
    parser.add_argument("--base-mode", choices=("today", "grouped"), default="grouped",
                        help="the base's path: one transaction a store, or its group commit")
    parser.add_argument("--repeats", type=int, default=0,
                        help="of the stores, how many repeat a seeded fact (work_items)")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--new-mode", choices=("grouped", "journal"), default="journal",
                        help="the new side: answered at the store journal's commit (journal)")
    parser.add_argument("--service", action="store_true",
                        help="both sides through a real memory service and its socket")
    parser.add_argument("--json")
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.root is not None:  # a child
        sys.path.insert(0, str(args.root))
        if args.seed is not None:
            child_seed(args.seed)
            print("{}")
        elif args.profile is not None:
            print(json.dumps(child_profile(args.profile, args.stores)))
        else:
            db, mode, callers = args.measure
            if mode == "service":
                from store_rate_service import measure

                print(json.dumps(measure(args.root, Path(db), int(callers),
                                         work_items(args.stores, args.repeats), PROJECT,
                                         model_cache())))
            else:
                print(json.dumps(child_measure(Path(db), mode, int(callers), args.stores,
                                               args.repeats)))
        return
    if args.base is None:
        raise SystemExit("--base: a checkout of the code to compare with")
    callers = [int(c) for c in args.callers.split(",")]
    work = Path(tempfile.mkdtemp(prefix="lore-store-rate-"))
    try:
        seed = work / "seed.db"
        run_child(args.base, "--seed", str(seed))  # the older schema: the new code migrates it
        results: dict[tuple[str, int], list[dict]] = {}
        code = {"base": (args.base, "service" if args.service else args.base_mode),
                "new": (ROOT, "service" if args.service else args.new_mode)}
        for round_ in range(args.rounds):
            for n in callers:
                for which in (("base", "new") if round_ % 2 == 0 else ("new", "base")):
                    db = work / f"{which}-{n}-{round_}.db"
                    shutil.copy(seed, db)
                    root, mode = code[which]
                    got = run_child(root, "--stores", str(args.stores), "--repeats",
                                    str(args.repeats), "--measure", str(db), mode, str(n))
                    got["load"] = round(os.getloadavg()[0], 1)
                    results.setdefault((which, n), []).append(got)
                    print(json.dumps({"which": which, **{k: v for k, v in got.items()
                                                         if k != "decisions"}}), file=sys.stderr)
        print(f"\nstore_memory throughput, {args.stores} stores, median of {args.rounds} "
              f"alternating runs (answers/s, p50 latency ms; then stores placed/s, until the "
              f"last is placed); base = {args.base} ({code['base'][1]}), new = this checkout "
              f"({code['new'][1]})")
        print("| callers | answered, base | answered, new | new ÷ base | placed/s, base → new "
              "| CPU ms a store, base → new | with the drain, base → new | load |")
        print("|---|---|---|---|---|---|---|---|")

        def med(which: str, n: int, key: str) -> float:
            return statistics.median(r[key] for r in results[(which, n)])
        for n in callers:
            base, new = med("base", n, "per_s"), med("new", n, "per_s")
            loads = [r["load"] for w in ("base", "new") for r in results[(w, n)]]
            cpu = (f"{med('base', n, 'cpu_ms')} → {med('new', n, 'cpu_ms')} | "
                   f"{med('base', n, 'cpu_ms_with_drain')} → "
                   f"{med('new', n, 'cpu_ms_with_drain')}" if not args.service else "- | -")
            print(f"| {n} | {base} ({med('base', n, 'p50_ms')} ms) | {new} "
                  f"({med('new', n, 'p50_ms')} ms) | {new / base:.2f}x | "
                  f"{med('base', n, 'placed_per_s')} → {med('new', n, 'placed_per_s')} | "
                  f"{cpu} | {min(loads)}-{max(loads)} |")
        # The same stored result: every run of either side decided every store alike.
        for n in callers:
            runs = results[("base", n)] + results[("new", n)]
            differ = {k for r in runs for k, v in r["decisions"].items()
                      if list(v) != list(runs[0]["decisions"].get(k, ()))}
            dups = sum(v[1] for v in runs[0]["decisions"].values())
            print(f"{n} callers: {len(runs[0]['decisions'])} stores ({dups} duplicates), "
                  f"decided differently in some run: {len(differ)} {sorted(differ)[:5]}")
        for n in callers if not args.service else ():
            runs = results[("new", n)]
            totals = {k: statistics.median(r["timings_s"][k] for r in runs)
                      for k in runs[0]["timings_s"]}
            print(f"new, {n} callers, seconds per {args.stores} stores: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in totals.items()))
        if not args.no_profile:
            db = work / "profile.db"
            shutil.copy(seed, db)
            profile = run_child(args.base, "--stores", str(args.stores), "--profile", str(db))
            print(f"\nbefore, one caller, per store (cProfile, one run): {json.dumps(profile)}")
            results[("profile", 1)] = [profile]
        if args.json:
            Path(args.json).write_text(json.dumps(
                {f"{m}-{n}": r for (m, n), r in results.items()}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
