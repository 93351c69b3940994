"""Benchmark of the MCP server (design §10).

    python bench/bench_server.py [--sizes 10000 100000] [--runs 5] [--queries 300] [--json PATH]

Measures, for each database size:
- spawn → initialize → tools/list, and spawn → first query_memory answered, over real stdio
  (`python -m lore_plugin.server`, the SDK's stdio client, the legacy initialize handshake that
  Claude Code uses); the median of --runs spawns, each with and without the vector snapshot
  that an earlier server leaves next to the database;
- warm `query_memory` latency p50/p95 through the SDK's in-memory client (legacy JSON-RPC
  framing, the same tool functions as over stdio), next to `Memory.query` alone, so the MCP
  overhead is visible;
- peak RSS (VmHWM) of a stdio server process after the model and the vector index are loaded
  and a few queries were answered: once reading the index from SQLite, once from the snapshot
  that first server left.

Synthetic data, and why it is built this way: N fragments shaped like real memory, N/500
topics > 20 concepts each > facts (about 24 a concept), with varied technical text, five
projects, six months of creation times, random importance and some associative edges.
Embedding 100K texts with the real model takes ~5 minutes, so only a few thousand texts are
embedded for real: every topic and concept, and a pool of 3,000 distinct clauses. A fact's
text joins two pool clauses, and its vector is the normalised mix of their vectors and its
concept's, which is close to what the model gives the joined text and keeps facts near their
concept. The generated database is cached in bench/.cache/bench-<N>-v<VERSION>.db; delete it
(or pass --rebuild) to regenerate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # as lore_plugin.server.main() does, before numpy loads

import anyio
import numpy as np

from lore_plugin.core.types import NewFragment
from lore_plugin.embedding.embedder import LocalEmbedder, assemble_from_packages, to_blob
from lore_plugin.embedding.vector_snapshot import snapshot_path
from lore_plugin.recall.memory import Memory
from lore_plugin.store import Store

CACHE = ROOT / "bench" / ".cache"
VERSION = 1
PROJECTS = [f"/home/dev/src/project-{c}" for c in "abcde"]
DAY = 86400.0

DOMAINS = """PostgreSQL operations|Kubernetes deployments|React front end|Rust async services|
Python packaging|CI pipelines|Terraform infrastructure|observability and tracing|auth and sessions|
billing service|search indexing|mobile app releases|data warehouse|feature flags|API gateway|
message queues|caching layer|security reviews|onboarding docs|performance tuning|GraphQL schema|
payment webhooks|email delivery|image processing|machine learning training|vector search|
logging pipeline|backup and restore|DNS and TLS|load testing|accessibility|internationalisation|
code review practice|git workflow|monorepo tooling|Go microservices|Java build system|
SQLite storage|Redis cluster|Kafka consumers|S3 storage|CDN configuration|rate limiting|
audit trail|analytics events|notification service|search relevance|test flakiness|
dependency upgrades|incident response""".replace("\n", "").split("|")
SUBJECTS = """the retry policy|connection pooling|the migration runner|the deploy script|
schema validation|the cache key format|token refresh|the worker queue|the health check|
index rebuilds|the release checklist|error budgets|the config loader|feature toggles|
the build cache|log sampling|the backoff timer|pagination|idempotency keys|the circuit breaker|
webhook signatures|the cron scheduler|batch imports|the staging cluster|secrets rotation|
query planning|vacuum settings|lock timeouts|the lint rules|snapshot tests|the test fixtures|
the ORM session|the HTTP client|TLS certificates|the rollout strategy|canary analysis|
memory limits|CPU throttling|the thread pool|async cancellation|the event loop|
the serializer|date parsing|unicode handling|the upload path|the download proxy|
the search ranking|embedding refresh|the vector index|the bloom filter""".replace("\n", "").split("|")
VERBS = """must run before|breaks when combined with|was replaced by|depends on|is configured by|
times out under|is cached alongside|is disabled for|was rewritten to avoid|logs a warning about|
is retried after|is validated against|falls back to|is sharded by|is measured with|
should never call|is tuned together with|conflicts with|is documented next to|
was introduced to fix""".replace("\n", "").split("|")
OBJECTS = """the nightly job|the primary database|the read replica|the auth middleware|
the mobile client|the admin dashboard|the legacy API|the message broker|the object store|
the search cluster|the payment provider|the email provider|the feature store|the CDN edge|
the staging environment|the load balancer|the metrics exporter|the tracing collector|
the job scheduler|the rate limiter|the session store|the analytics pipeline|the CI runner|
the container registry|the secrets manager|the DNS resolver|the config service|
the schema registry|the audit log|the websocket gateway""".replace("\n", "").split("|")
CONDITIONS = """during peak traffic|after a failover|on cold start|in the EU region|
when the queue backs up|for enterprise tenants|on ARM builds|under memory pressure|
after the v2 upgrade|in integration tests|when TLS renegotiates|on leap days|
for very large payloads|with the new driver|behind the corporate proxy|on Windows runners|
in dry-run mode|when clocks drift|with more than 10k rows|after a schema change""".replace(
    "\n", "").split("|")


def model_dir() -> Path | None:
    return assemble_from_packages(CACHE / "all-MiniLM-L6-v2")


def make_embedder(models: Path = CACHE / "models") -> LocalEmbedder:
    folder = model_dir()
    if folder is not None:
        os.environ["LORE_EMBED_MODEL_DIR"] = str(folder)
    embedder = LocalEmbedder(models)
    if not embedder.available:
        sys.exit(f"the embedding model is needed: {embedder.failure}")
    return embedder


# -- synthetic data ---------------------------------------------------------------------
def clause(rng: random.Random) -> str:
    code = rng.choice(["", "", f" (ERR_{rng.randint(1000, 9999)})",
                       f" since v{rng.randint(1, 9)}.{rng.randint(0, 30)}",
                       f" in {rng.choice(['prod', 'staging', 'ci'])}"])
    return (f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
            f"{rng.choice(CONDITIONS)}{code}")


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def build_db(path: Path, size: int, embedder: LocalEmbedder) -> None:
    rng = random.Random(size)
    nprng = np.random.default_rng(size)
    n_topics = max(20, size // 500)
    n_concepts = n_topics * 20
    n_facts = size - n_topics - n_concepts
    topics = [f"{DOMAINS[i % len(DOMAINS)]}" + (f" ({PROJECTS[i % 5][-9:]}, area {i // len(DOMAINS)})"
                                                 if i >= len(DOMAINS) else "")
              for i in range(n_topics)]
    concepts = [(t, f"{rng.choice(SUBJECTS)} in {topics[t]}") for t in range(n_topics)
                for _ in range(20)]
    pool = list(dict.fromkeys(clause(rng) for _ in range(4000)))[:3000]
    started = time.perf_counter()
    print(f"  embedding {n_topics + n_concepts + len(pool)} texts for {size} fragments…",
          file=sys.stderr)
    topic_vecs = embedder.embed(topics)
    concept_vecs = embedder.embed([f"{topics[t]}: {text}" for t, text in concepts])
    pool_vecs = embedder.embed(pool)
    print(f"  embedded in {time.perf_counter() - started:.0f} s; writing…", file=sys.stderr)
    now = time.time()
    tmp = path.with_suffix(".tmp")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    store = Store(tmp)

    def new(summary: str, content: str, depth: int, vec: np.ndarray, parent: str | None) -> str:
        frag = NewFragment(content=content, summary=summary, depth=depth,
                           importance=rng.choice([0.2, 0.5, 0.5, 0.9]),
                           project=rng.choice(PROJECTS),
                           created_at=now - rng.uniform(0, 180) * DAY)
        return store.insert(frag, now, to_blob(vec), parent)

    with store.write():
        topic_ids = [new(t, f"Everything about {t}.", 0, topic_vecs[i], None)
                     for i, t in enumerate(topics)]
        concept_ids = [new(text, f"How {text} works, and what we decided about it.", 1,
                           concept_vecs[i], topic_ids[t]) for i, (t, text) in enumerate(concepts)]
        for k in range(n_facts):
            c = k % n_concepts
            a, b = rng.randrange(len(pool)), rng.randrange(len(pool))
            vec = unit(pool_vecs[a] + 0.5 * pool_vecs[b] + 0.6 * concept_vecs[c]
                       + 0.03 * nprng.standard_normal(384))
            new(pool[a], f"{pool[a]}; also, {pool[b]}.", 2, vec, concept_ids[c])
        for _ in range(n_concepts // 10):
            x, y = rng.sample(concept_ids, 2)
            store.link(x, y, "associative", round(rng.uniform(0.3, 0.9), 2), now)
    store.close()
    os.replace(tmp, path)
    print(f"  built {path.name} in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def bench_db(size: int, embedder: LocalEmbedder, rebuild: bool) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"bench-{size}-v{VERSION}.db"
    if rebuild or not path.exists():
        build_db(path, size, embedder)
    return path


def queries(count: int) -> list[tuple[str, int]]:
    rng = random.Random(7)
    out = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.4:
            text = f"{rng.choice(SUBJECTS)} {rng.choice(OBJECTS)}"
        elif kind < 0.7:
            text = f"what did we decide about {rng.choice(SUBJECTS)} in {rng.choice(DOMAINS)}"
        elif kind < 0.85:
            text = rng.choice(DOMAINS)
        else:
            text = f"ERR_{rng.randint(1000, 9999)} {rng.choice(CONDITIONS)}"
        depth = rng.choices([0, 1, 2], weights=[15, 70, 15])[0]
        out.append((text, depth))
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# -- in-process latency -----------------------------------------------------------------
async def in_process(db: Path, embedder: LocalEmbedder, n: int) -> dict[str, float]:
    from mcp import Client

    from lore_plugin.server.tools import Service, build_server

    work = Path(tempfile.mkdtemp()) / "memory.db"
    copy_db(db, work)  # reinforcement writes must not drift the cached database
    memory = Memory(work, embedder, project=PROJECTS[0])
    service = Service(memory)
    service.warm_up()
    asked = queries(n)
    direct = []
    for text, depth in asked[: n // 2]:
        t = time.perf_counter()
        memory.query(text, depth=depth)
        direct.append(time.perf_counter() - t)
    stages = query_stages(memory, [text for text, _ in asked[:100]])
    tool = []
    async with Client(build_server(service), mode="legacy") as client:
        await client.list_tools()
        for text, depth in asked:
            t = time.perf_counter()
            result = await client.call_tool("query_memory", {"topic": text, "depth": depth})
            tool.append(time.perf_counter() - t)
            assert not result.is_error, result.content
    memory.close()
    return {"query_p50_ms": 1000 * statistics.median(tool), "query_p95_ms": 1000 * pct(tool, 95),
            "memory_query_p50_ms": 1000 * statistics.median(direct),
            "memory_query_p95_ms": 1000 * pct(direct, 95), **stages}


def query_stages(memory: Memory, texts: list[str]) -> dict[str, float]:
    """Medians of the three expensive steps of one query, to show where the time goes."""
    from lore_plugin.recall.terms import fts_expression

    embed, vector, keyword = [], [], []
    for text in texts:
        t0 = time.perf_counter()
        qvec = memory.embed_one(text)
        t1 = time.perf_counter()
        memory.index.search(qvec, 100)
        t2 = time.perf_counter()
        expr = fts_expression(text)
        if expr:
            memory.reader.keyword_search(expr, 100)
        t3 = time.perf_counter()
        embed.append(t1 - t0)
        vector.append(t2 - t1)
        keyword.append(t3 - t2)
    return {"stage_embed_ms": 1000 * statistics.median(embed),
            "stage_vector_ms": 1000 * statistics.median(vector),
            "stage_keyword_ms": 1000 * statistics.median(keyword)}


def copy_db(src: Path, dst: Path) -> None:
    source = Store(src, readonly=True)
    try:
        source.execute(f"VACUUM INTO '{dst}'")
    finally:
        source.close()


# -- stdio spawns -----------------------------------------------------------------------
SERVER_HOME = CACHE / "server-home"  # logs, and the model's optimised copy made once


def server_env(db: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LORE_DB_PATH=str(db), LORE_HOME=str(SERVER_HOME),
               LORE_NO_DOWNLOAD="1")
    # A real install keeps .pyc files; this workplace's PYTHONDONTWRITEBYTECODE would make every
    # spawn recompile the package.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    folder = model_dir()
    if folder is not None:
        env["LORE_EMBED_MODEL_DIR"] = str(folder)
    return env


async def spawn_once(db: Path, home: Path, rss: bool = False) -> dict[str, float]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "lore_plugin.server"],
                                   env=server_env(db), cwd=str(home))
    started = time.perf_counter()
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        initialized = time.perf_counter()
        await client.list_tools()
        listed = time.perf_counter()
        result = await client.call_tool("query_memory", {"topic": "retry policy timeouts"})
        answered = time.perf_counter()
        assert not result.is_error, result.content
        out = {"initialize_s": initialized - started, "tools_list_s": listed - started,
               "first_query_s": answered - started}
        if rss:
            for text, depth in queries(20):
                await client.call_tool("query_memory", {"topic": text, "depth": depth})
            await client.call_tool("explore_memory", {"topic": "PostgreSQL operations"})
            await client.call_tool("list_topics", {})
            out["rss_mb"], out["rss_now_mb"] = rss_mb()
    return out


def rss_mb() -> tuple[float, float]:
    """(peak VmHWM, current VmRSS) of our child `lore_plugin.server` process, in MB."""
    me = str(os.getpid())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"lore_plugin.server" in cmdline:
            status = dict(line.split(":", 1) for line in (proc / "status").read_text().splitlines())
            return (int(status["VmHWM"].split()[0]) / 1024, int(status["VmRSS"].split()[0]) / 1024)
    return float("nan"), float("nan")


async def spawns(db: Path, runs: int) -> dict[str, float]:
    """Spawns alternate between a cold start (no vector snapshot: the first server after a
    consolidation, or ever) and a start from the snapshot an earlier server wrote."""
    home = Path(tempfile.mkdtemp())
    work = home / "memory.db"
    copy_db(db, work)
    snapshot = snapshot_path(work)
    cold, warm = [], []
    for _ in range(runs):
        snapshot.unlink(missing_ok=True)
        cold.append(await spawn_once(work, home))
        for _ in range(100):  # the cold server writes it beside its first answer
            if snapshot.exists():
                break
            await anyio.sleep(0.05)
        warm.append(await spawn_once(work, home))
    out = {key: statistics.median(r[key] for r in warm) for key in warm[0]}
    out["first_query_cold_s"] = statistics.median(r["first_query_s"] for r in cold)
    out["tools_list_cold_s"] = statistics.median(r["tools_list_s"] for r in cold)
    return out


# -- main -------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=5, help="spawns per size (median)")
    parser.add_argument("--queries", type=int, default=300, help="queries per size")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--rebuild", action="store_true", help="regenerate cached databases")
    parser.add_argument("--no-spawn", action="store_true", help="skip the stdio spawn timings")
    args = parser.parse_args()

    embedder = make_embedder()
    make_embedder(SERVER_HOME / "models")  # as `lore prepare` does on install: no measured
    # server pays for the model's optimised copy
    rows: list[dict[str, Any]] = []
    for size in args.sizes:
        db = bench_db(size, embedder, args.rebuild)
        row: dict[str, Any] = {"fragments": size}
        row.update(anyio.run(in_process, db, embedder, args.queries))
        if not args.no_spawn:
            row.update(anyio.run(spawns, db, args.runs))
            home = Path(tempfile.mkdtemp())
            copy_db(db, home / "memory.db")
            cold = anyio.run(partial(spawn_once, home / "memory.db", home, rss=True))
            row["rss_cold_mb"] = cold["rss_mb"]
            if snapshot_path(home / "memory.db").exists():  # written by that cold server
                warm = anyio.run(partial(spawn_once, home / "memory.db", home, rss=True))
                row["rss_mb"], row["rss_now_mb"] = warm["rss_mb"], warm["rss_now_mb"]
        rows.append(row)
        print_row(row)

    result = {"machine": machine(), "results": rows,
              "targets": {"tools_list_s": 1.0, "first_query_s": 1.5, "query_p50_ms": 20,
                          "query_p95_ms": 40, "rss_mb": 300}}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


def print_row(row: dict[str, Any]) -> None:
    labels = [("tools_list_s", "spawn → tools/list", "s", 1.0),
              ("first_query_s", "spawn → first query (vector snapshot)", "s", 1.5),
              ("first_query_cold_s", "spawn → first query (no snapshot yet)", "s", None),
              ("query_p50_ms", "query_memory p50 (in-process client)", "ms", 20),
              ("query_p95_ms", "query_memory p95 (in-process client)", "ms", 40),
              ("memory_query_p50_ms", "Memory.query p50 (no MCP, reinforcing)", "ms", None),
              ("memory_query_p95_ms", "Memory.query p95 (no MCP, reinforcing)", "ms", None),
              ("stage_embed_ms", "  of which: embed the query (p50)", "ms", None),
              ("stage_vector_ms", "  of which: vector top-100 (p50)", "ms", None),
              ("stage_keyword_ms", "  of which: FTS5 top-100 (p50)", "ms", None),
              ("rss_mb", "server peak RSS, model + index (snapshot)", "MB", 300),
              ("rss_now_mb", "server RSS after the queries (snapshot)", "MB", None),
              ("rss_cold_mb", "server peak RSS, index read from SQLite", "MB", None)]
    print(f"\n{row['fragments']:,} fragments")
    print(f"  {'measure':44} {'value':>9}  {'target':>8}")
    for key, label, unit_name, target in labels:
        if key in row:
            goal = f"≤ {target}" if target is not None else ""
            print(f"  {label:44} {row[key]:>7.3g} {unit_name:2} {goal:>8}")


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "load_avg": os.getloadavg()}


if __name__ == "__main__":
    main()
