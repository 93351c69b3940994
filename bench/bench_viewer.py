"""Benchmark of the viewer (`lore ui`) at 100K fragments: how long the server takes to build
the tree and search pages.

    python bench/bench_viewer.py [--size 100000] [--runs 30] [--queries 60] [--json PATH]

It starts the real viewer (`python -m lore_plugin.cli ui --no-browser`) on a copy of the
benchmark database that bench_server.py builds (N/500 topics > 20 concepts > facts, real
vectors for topics and concepts; see its docstring), waits for the vector index to load, and
requests each page over HTTP on 127.0.0.1. The server-side time is the `Server-Timing` header
the viewer sets (request in → response headers out, HTML built); the round trip seen by the
client is shown beside it. Pages:

- the topic tree: the first page of topics (100 of N/500, with their child counts) and the
  last page;
- children loaded on demand: a topic's 20 concepts, a concept's ~24 facts;
- for reference (no budget): one topic's fragment page, and the activity page (without the
  doctor's checks, which run when their section is opened);
- search: `--queries` queries of bench_server's mix, through the query_memory engine at depth
  1, and at any depth.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from bench_server import bench_db, copy_db, make_embedder, model_dir, queries
from common import ROOT, bench_env, summary_ms, table, write_json

from lore_plugin.web.app import login_link

SERVER_HOME = ROOT / "bench" / ".cache" / "viewer-home"


def server_ms(answer: httpx.Response) -> float:
    timing = answer.headers["server-timing"]
    return float(timing.split("dur=", 1)[1]) / 1000  # seconds, like the client's timer


def start(db: Path, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    folder = model_dir()
    env = bench_env(LORE_HOME=str(home), LORE_DB_PATH=str(db), LORE_NO_DOWNLOAD="1",
                    **({"LORE_EMBED_MODEL_DIR": str(folder)} if folder else {}))
    (home / "ui.json").unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "lore_plugin.cli", "ui", "--no-browser"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            return proc, login_link(json.loads((home / "ui.json").read_text()))
        except (OSError, ValueError, KeyError):
            time.sleep(0.2)
    proc.kill()
    sys.exit("the viewer did not start")


def measure(client: httpx.Client, paths: list[str], runs: int) -> tuple[list[float], list[float]]:
    server, total = [], []
    for i in range(runs):
        path = paths[i % len(paths)]
        began = time.perf_counter()
        answer = client.get(path)
        total.append(time.perf_counter() - began)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
        server.append(server_ms(answer))
    return server, total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    source = bench_db(args.size, make_embedder(), args.rebuild)
    SERVER_HOME.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lore-viewer-bench-") as tmp:
        db = Path(tmp) / "memory.db"
        copy_db(source, db)
        proc, url = start(db, SERVER_HOME)
        try:
            parts = urlsplit(url)
            client = httpx.Client(base_url=f"http://{parts.netloc}", timeout=300)
            assert client.get(f"/?{parts.query}").status_code == 303
            began = time.perf_counter()
            client.get("/search", params={"q": "warm up", "depth": "1"})  # waits for the index
            print(f"  first search (vector index loaded) after {time.perf_counter() - began:.1f} s",
                  file=sys.stderr)
            rows, results = [], {}
            tree = client.get("/").text
            topics = int(tree.split('<p class="muted">', 1)[1].split(" topics", 1)[0])
            topic = tree.split('data-src="/children?id=', 1)[1].split('"', 1)[0]
            concepts = client.get(f"/children?id={topic}").text
            concept = concepts.split('data-src="/children?id=', 1)[1].split('"', 1)[0]
            asked = queries(args.queries)
            rng = random.Random(3)
            cases = {
                "tree, first page": ["/"],
                "tree, last page": [f"/?page={(topics - 1) // 100}"],
                "children of a topic": [f"/children?id={topic}"],
                "children of a concept": [f"/children?id={concept}"],
                "fragment page of a topic": [f"/fragment/{topic}"],
                "activity page": ["/activity"],
                "search, depth 1": [f"/search?q={httpx.QueryParams({'q': q})['q']}&depth=1"
                                    for q, _ in asked],
                "search, any depth": [f"/search?q={httpx.QueryParams({'q': q})['q']}&depth=any"
                                      for q, _ in rng.sample(asked, len(asked))],
            }
            for name, paths in cases.items():
                runs = max(args.runs, len(paths)) if name.startswith("search") else args.runs
                server, total = measure(client, paths, runs)
                s, t = summary_ms(server), summary_ms(total)
                results[name] = {"server": s, "round_trip": t}
                rows.append([name, s["p50_ms"], s["p95_ms"], t["p50_ms"], t["p95_ms"], s["runs"]])
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(table(f"viewer at {args.size:,} fragments (ms)",
                ["page", "server p50", "server p95", "round trip p50", "round trip p95", "runs"],
                rows))
    worst = max(r["server"]["p95_ms"] for r in results.values())
    print(f"\nslowest page, server-side p95: {worst:.1f} ms "
          f"({'within' if worst <= 300 else 'OVER'} the 300 ms budget)")
    write_json(args.json, "viewer", {"size": args.size, "pages": results,
                                     "median_of_p50_ms": statistics.median(
                                         r["server"]["p50_ms"] for r in results.values())})


if __name__ == "__main__":
    main()
