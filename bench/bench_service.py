"""Benchmark of the memory service (issue 27): N sessions' MCP servers, today's against the
thin fronts with one service behind them, side by side in one run.

    python bench/bench_service.py --base /tmp/base-service [--size 2000] [--sessions 1 4 8]
                                  [--runs 3] [--queries 200] [--json PATH]

`--base` is a checkout of the code to compare with (`git worktree add --detach /tmp/base-service
main`); "new" is this checkout. Every figure runs both, alternating base and new run by run,
over real stdio (`python -m lore_plugin.server`, the SDK's stdio client, the legacy handshake
Claude Code uses) on a copy of the same synthetic database (bench_server.py's, cached):
- total memory with N sessions open, each having answered a first query and a few more (the
  model and index loaded): the sum of VmRSS, and the sum of PSS (shared pages split between
  the processes that share them, so libraries loaded by every front are not counted N times),
  of the N servers (base) or the N fronts plus the service (new);
- the memory each extra session adds: (total at the most sessions - total at 1) / (N - 1);
- MCP start: spawn → initialize → tools/list answered (new: with the service already running,
  as for every session but the first);
- time to the first query answered from spawn: base (its own model), new with no service yet
  (the front starts it), new with the service running;
- query_memory latency p50/p95 over stdio, warm: one base server and one new front (with its
  service) open side by side, asked the same queries in turn, query by query, so that the
  machine's load (it is shared) falls on both alike."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_server import bench_db, copy_db, make_embedder, model_dir, pct, queries  # noqa: E402

CACHE = ROOT / "bench" / ".cache"


def env_for(code: Path, home: Path, db: Path, service: str = "on") -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(code), LORE_HOME=str(home), LORE_DB_PATH=str(db),
               LORE_NO_DOWNLOAD="1", LORE_SERVICE=service)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a real install keeps its .pyc files
    folder = model_dir()
    if folder is not None:
        env["LORE_EMBED_MODEL_DIR"] = str(folder)
    return env


def memory_of(pid: int) -> tuple[float, float]:
    """(VmRSS, PSS) of one process, in MB."""
    rss = pss = 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) / 1024
    except OSError:
        pass
    return rss, pss


def lore_processes(home: Path) -> list[int]:
    """Our child servers or fronts, and the service of `home` (not our child: it detaches)."""
    me, pids = str(os.getpid()), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[1] == me and b"lore_plugin.server" in cmdline:
            pids.append(int(proc.name))
    info = service_info(home)
    if info is not None:
        pids.append(int(info["pid"]))
    return pids


def service_info(home: Path) -> dict[str, Any] | None:
    try:
        return json.loads((home / "run" / "service.json").read_text())
    except (OSError, ValueError):
        return None


def stop_service(home: Path) -> None:
    info = service_info(home)
    if info is None:
        return
    try:
        os.kill(int(info["pid"]), signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while Path(f"/proc/{info['pid']}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def fresh_home(label: str, src_db: Path) -> tuple[Path, Path]:
    """A Lore home with its own copy of the database; the model's optimised copy is shared
    from a home prepared once, as `lore prepare` leaves it on install."""
    home = Path(tempfile.mkdtemp(prefix=f"lore-bench-{label}-"))
    (home / "models").symlink_to(CACHE / "service-models", target_is_directory=True)
    db = home / "memory.db"
    copy_db(src_db, db)
    return home, db


async def sessions(code: Path, src_db: Path, label: str, n: int) -> dict[str, Any]:
    """N sessions at once; each answers a first query and a few more. Memory is read with all
    open."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    home, db = fresh_home(label, src_db)
    out: dict[str, Any] = {}
    try:
        async with AsyncExitStack() as stack:
            clients = []
            for i in range(n):
                project = home / f"project-{i}"
                project.mkdir()
                params = StdioServerParameters(command=sys.executable,
                                               args=["-m", "lore_plugin.server"],
                                               env=env_for(code, home, db), cwd=str(project))
                clients.append(await stack.enter_async_context(
                    Client(params, mode="legacy", read_timeout_seconds=300)))

            async def first(client: Any) -> None:
                for text, depth in queries(8):
                    result = await client.call_tool("query_memory", {"topic": text, "depth": depth})
                    assert not result.is_error, result.content

            async with anyio.create_task_group() as tg:
                for client in clients:
                    tg.start_soon(first, client)
            await anyio.sleep(1.0)  # reinforcement and snapshot writes settle
            pids = lore_processes(home)
            mem = [memory_of(p) for p in pids]
            out.update(processes=len(pids), rss_mb=sum(m[0] for m in mem),
                       pss_mb=sum(m[1] for m in mem))
    finally:
        stop_service(home)
        shutil.rmtree(home, ignore_errors=True)
    return out


async def latency(codes: dict[str, Path], src_db: Path, n_queries: int,
                  base_service: str = "on") -> dict[str, Any]:
    """Warm query_memory latency, base and new asked in turn, query by query. With
    base_service "off" the base serves in-process (today's fallback path), so `--base .`
    compares the front + service hop with the same code's in-process answer."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    homes = {label: fresh_home(label, src_db) for label in codes}
    lat: dict[str, list[float]] = {label: [] for label in codes}
    try:
        async with AsyncExitStack() as stack:
            clients = {}
            for label, code in codes.items():
                home, db = homes[label]
                clients[label] = await stack.enter_async_context(Client(
                    StdioServerParameters(command=sys.executable, args=["-m", "lore_plugin.server"],
                                          env=env_for(code, home, db, base_service
                                                      if label == "base" else "on"),
                                          cwd=str(home)),
                    mode="legacy", read_timeout_seconds=300))
            for client in clients.values():  # warm: model, index, first-use paths
                for text, depth in queries(20):
                    await client.call_tool("query_memory", {"topic": text, "depth": depth})
            for text, depth in queries(n_queries):
                for label, client in clients.items():
                    started = time.perf_counter()
                    result = await client.call_tool("query_memory", {"topic": text, "depth": depth})
                    lat[label].append((time.perf_counter() - started) * 1000)
                    assert not result.is_error, result.content
    finally:
        for home, _ in homes.values():
            stop_service(home)
            shutil.rmtree(home, ignore_errors=True)
    return {label: {"p50_ms": statistics.median(v), "p95_ms": pct(v, 95), "n": len(v)}
            for label, v in lat.items()}


async def start_times(code: Path, src_db: Path, label: str, service_running: bool
                      ) -> dict[str, float]:
    """spawn → tools/list, and spawn → first query answered, for one session."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    home, db = fresh_home(label, src_db)
    try:
        if service_running:  # another session started it earlier and it is warm
            async with Client(StdioServerParameters(
                    command=sys.executable, args=["-m", "lore_plugin.server"],
                    env=env_for(code, home, db), cwd=str(home)), mode="legacy",
                    read_timeout_seconds=300) as first:
                await first.call_tool("query_memory", {"topic": "warm up"})
        started = time.perf_counter()
        async with Client(StdioServerParameters(
                command=sys.executable, args=["-m", "lore_plugin.server"],
                env=env_for(code, home, db), cwd=str(home)), mode="legacy",
                read_timeout_seconds=300) as client:
            await client.list_tools()
            listed = time.perf_counter()
            await client.call_tool("query_memory", {"topic": "retry policy timeouts"})
            answered = time.perf_counter()
    finally:
        stop_service(home)
        shutil.rmtree(home, ignore_errors=True)
    return {"start_s": listed - started, "first_query_s": answered - started}


def median_of(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="checkout of the old code")
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--base-service", choices=["on", "off"], default="on",
                        help="off: the base serves in-process (LORE_SERVICE=off)")
    parser.add_argument("--latency-only", action="store_true",
                        help="only the query_memory latency row")
    args = parser.parse_args()

    db = bench_db(args.size, make_embedder(), False)
    make_embedder(CACHE / "service-models")  # the optimised model copy, made once
    codes = {"base": args.base.resolve(), "new": ROOT}
    result: dict[str, Any] = {"fragments": args.size, "runs": args.runs}
    for n in [] if args.latency_only else args.sessions:
        rows: dict[str, list[dict[str, Any]]] = {"base": [], "new": []}
        for _ in range(args.runs):
            for label, code in codes.items():  # alternating, run by run
                rows[label].append(anyio.run(sessions, code, db, label, n))
        for label in codes:
            result[f"{label}_{n}"] = {k: median_of(rows[label], k) for k in rows[label][0]}
            print(f"{n} session(s), {label}: {result[f'{label}_{n}']}", flush=True)
    starts: dict[str, list[dict[str, float]]] = {"base": [], "new_cold": [], "new_warm": []}
    for _ in range(0 if args.latency_only else args.runs):
        starts["base"].append(anyio.run(start_times, codes["base"], db, "base", False))
        starts["new_cold"].append(anyio.run(start_times, ROOT, db, "new", False))
        starts["new_warm"].append(anyio.run(start_times, ROOT, db, "new", True))
    for label, rows_ in starts.items() if not args.latency_only else []:
        result[f"start_{label}"] = {k: median_of(rows_, k) for k in rows_[0]}
        print(f"start, {label}: {result[f'start_{label}']}", flush=True)
    result["query_memory"] = anyio.run(latency, codes, db, args.queries, args.base_service)
    print(f"query_memory: {result['query_memory']}", flush=True)
    most, least = max(args.sessions), min(args.sessions)
    if most > least and not args.latency_only:
        for label in codes:
            for key in ("rss_mb", "pss_mb"):
                result[f"{label}_per_extra_session_{key}"] = (
                    result[f"{label}_{most}"][key] - result[f"{label}_{least}"][key]) / (most - least)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
