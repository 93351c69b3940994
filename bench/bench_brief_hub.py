"""The SessionStart hook with a hub and a team space (issues 28, 29), whole process, side by
side with another checkout (`--base`, say a `git worktree` of main), alternating run by run.

    python bench/bench_brief_hub.py --base /tmp/base [--runs 15] [--json PATH]

One throwaway PostgreSQL 18 + pgvector (`lore hub dev`'s server, Unix socket) holds a hub space
(`[hub] space`) and a team space, each with 40 facts of one repository, whose committed
`.lore.toml` names the team space; the local file holds 12 topics of 20 facts. Each checkout
has its own Lore home (one file copied), so caches and services never mix. Rows:
- base: its hook as it is (on main: it imports psycopg, connects and reads both spaces);
- this checkout, the memory service running and warm (the hook asks it);
- this checkout, no service (`LORE_SERVICE=off`): the hook shows the cached part and queues a
  refresh, which the bench lets finish before the next run;
- this checkout without a hub, for reference.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import machine, summary_ms, table, write_json  # noqa: E402

from lore_plugin.core.project import project_key  # noqa: E402
from lore_plugin.core.types import NewFragment  # noqa: E402
from lore_plugin.hub import HubStore, dev, init_hub  # noqa: E402
from lore_plugin.recall.memory import Memory  # noqa: E402
from tests.conftest import workers_idle  # noqa: E402
from tests.team_api import make_repo  # noqa: E402


def fill_local(db: Path, project: str) -> None:
    memory = Memory(db, None, project=project)
    for i in range(12):
        topic = memory.store(f"Topic {i} notes", f"Topic number {i}", depth=0, source="user")
        concept = memory.store(f"Concept under topic {i}", f"Concept {i}", parent_id=topic.id,
                               depth=1, source="user")
        for j in range(20):
            memory.store(f"Fact {j} of topic {i}: value {i * 100 + j}.", f"Fact {i}.{j}",
                         parent_id=concept.id, depth=2, source="user")
    memory.close()


def fill_space(url: str, space: str, project: str, what: str) -> None:
    store = HubStore(url, space, create_space=True)
    for i in range(40):
        store.insert(NewFragment(content=f"{what} rule {i}: keep it", summary=f"{what} rule {i}",
                                 depth=2, importance=0.5 + i / 100, project=project,
                                 source="user", basis="stated"), time.time())
    store.close()


def hook(python: str, checkout: Path, env: dict[str, str], event: bytes,
         cpu: list[float] | None = None) -> tuple[float, str]:
    """Wall seconds until the hook's pipes close, and its brief; its CPU seconds (user +
    system) go to `cpu`: on a loaded machine the steadier figure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # Run from the checkout: `-m` puts the working folder first on sys.path.
    done = subprocess.run([python, "-m", "lore_plugin.hooks", "session-start"], input=event,
                          env={**env, "PYTHONPATH": str(checkout)}, capture_output=True,
                          check=True, cwd=checkout)
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    out = done.stdout.decode().strip()
    return took, json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    base = Path(args.base).resolve()
    folder = Path(tempfile.mkdtemp(prefix="lore-bench-brief-hub-"))
    server = dev.start(folder / "hub")
    try:
        init_hub(server.url)
        suffix = os.urandom(3).hex()
        team, mine = f"platform-{suffix}", f"mine-{suffix}"
        repo = make_repo(folder / "src" / "api", space=team,
                         remote=f"git@github.com:acme/api-{suffix}.git")
        project = project_key(str(repo))
        fill_space(server.url, mine, project, "Personal")
        fill_space(server.url, team, project, "Team")
        fill_local(folder / "seed.db", project)
        homes = {}
        for name in ("base", "service", "cached", "nohub"):
            home = folder / name
            home.mkdir(mode=0o700)
            shutil.copy(folder / "seed.db", home / "memory.db")
            homes[name] = home
        common = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        common.update(LORE_CLAUDE_PROJECTS=str(folder / "projects"), LORE_SERVICE_IDLE="900",
                      HOME=str(folder / "user"))

        def env(name: str, hub: bool = True, **extra: str) -> dict[str, str]:
            home = homes[name]
            more = {"LORE_HUB_URL": server.url, "LORE_HUB_SPACE": mine} if hub else {}
            return {**common, "LORE_HOME": str(home), "LORE_DB_PATH": str(home / "memory.db"),
                    **more, **extra}

        envs = {"base": env("base"), "service": env("service"),
                "cached": env("cached", LORE_SERVICE="off"), "nohub": env("nohub", hub=False)}
        checkouts = {"base": base, "service": ROOT, "cached": ROOT, "nohub": ROOT}
        event = json.dumps({"session_id": "s1", "cwd": str(repo), "source": "startup",
                            "hook_event_name": "SessionStart"}).encode()
        python = sys.executable
        for name in envs:  # one warm-up each: the service and the cache come from it
            hook(python, checkouts[name], envs[name], event)
        for name in ("service", "cached"):
            deadline = time.monotonic() + 120
            while not workers_idle(homes[name]) and time.monotonic() < deadline:
                time.sleep(0.1)
        log = homes["service"] / "logs" / "service.log"
        deadline = time.monotonic() + 180  # the service warm (it embeds the local file first)
        while not (log.exists() and "warm in" in log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.2)
        times: dict[str, list[float]] = {name: [] for name in envs}
        cpus: dict[str, list[float]] = {name: [] for name in envs}
        briefs: dict[str, str] = {}
        for _ in range(args.runs):
            for name in envs:
                took, briefs[name] = hook(python, checkouts[name], envs[name], event, cpus[name])
                times[name].append(took)
                deadline = time.monotonic() + 60
                while not workers_idle(homes[name]) and time.monotonic() < deadline:
                    time.sleep(0.05)  # the hook's detached jobs done before the next run
        labels = {"base": f"base ({base.name}): the hook reads the hub itself",
                  "service": "this checkout, memory service running",
                  "cached": "this checkout, no service (cached part)",
                  "nohub": "this checkout, no hub configured"}
        rows = []
        for name, label in labels.items():
            s = summary_ms(times[name])
            holds = all(f"{what} rule 39" in briefs[name] for what in ("Personal", "Team"))
            rows.append([label, s["p50_ms"], s["p95_ms"], s["min_ms"],
                         round(summary_ms(cpus[name])["p50_ms"], 1),
                         "yes" if holds else ("n/a" if name == "nohub" else "NO")])
        print(table(f"SessionStart with a hub space and a team space, {args.runs} alternating "
                    "runs (ms)", ["", "p50", "p95", "min", "CPU p50",
                                                      "hub+team lines in brief"], rows))
        if os.environ.get("BENCH_SHOW"):
            for name, brief in briefs.items():
                print(f"--- {name}\n{brief}\n")
        write_json(args.json, "brief_hub", {"runs": args.runs, "seconds": times,
                                             "cpu_seconds": cpus})
        print(f"load average at the end: {os.getloadavg()[0]:.1f}; {machine()}")
    finally:
        for name in ("base", "service", "cached", "nohub"):
            info = folder / name / "run" / "service.json"
            if info.exists():
                try:
                    os.kill(int(json.loads(info.read_text())["pid"]), 15)
                except (OSError, ValueError, KeyError):
                    pass
        dev.stop(folder / "hub")
        if not os.environ.get("BENCH_SHOW"):
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print("kept", folder)


if __name__ == "__main__":
    main()
