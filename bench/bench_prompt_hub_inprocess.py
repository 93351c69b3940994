"""The per-prompt answer of an in-process MCP server (`LORE_SERVICE=off`) with a hub space
(issue 28, "the other surfaces"): what fusing the hub space's notes costs, beside a "before"
checkout whose in-process server answered from the local file alone.

    python bench/bench_prompt_hub_inprocess.py --base /tmp/base-main [--rounds 6] [--json PATH]

One throwaway PostgreSQL 18 + pgvector (`lore hub dev`'s server) holds a space with one fact;
the local file another. Each round starts each checkout's server in turn (alternating which
goes first) through scripts/lore-launch, waits for its model (and, for this checkout, for the
hub note), then times `ask()` on its socket for 20 prompts, each worded differently so no
embedding is reused. Reported: the medians of the rounds' p50s, p95 over all prompts, and how
many answers carried the hub's note.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import bench_env, percentile, table, write_json  # noqa: E402

from lore_plugin.core.project import project_key  # noqa: E402
from lore_plugin.embedding.embedder import LocalEmbedder, assemble_from_packages  # noqa: E402
from lore_plugin.hub import HubStore, dev, init_hub  # noqa: E402
from lore_plugin.recall.memory import Memory  # noqa: E402
from lore_plugin.recall.prompt_socket import ask  # noqa: E402
from lore_plugin.recall.storing import store_knowledge  # noqa: E402
from tests.conftest import MODEL_CACHE, wait_for  # noqa: E402

LOCAL_FACT = "The billing service deploy window is Tuesday 14:00 to 16:00 UTC"
HUB_FACT = "The billing service deploy window freezes in the last week of each quarter"
PROMPT = "When is the billing service deploy window?"
PROMPTS = 20


def timed_round(code: Path, home: Path, project: Path, hub_url: str, label: str,
                tag: str) -> tuple[list[float], int]:
    """One server of checkout `code`: its answer times and how many carried the hub note."""
    env = bench_env(PYTHONPATH=str(code), LORE_HOME=str(home),
                    LORE_DB_PATH=str(home / "memory.db"), LORE_PYTHON=sys.executable,
                    LORE_EMBED_MODEL_DIR=str(assemble_from_packages(
                        MODEL_CACHE / "all-MiniLM-L6-v2")),
                    LORE_NO_DOWNLOAD="1", LORE_SERVICE="off", LORE_HUB_URL=hub_url,
                    LORE_HUB_SPACE="bench")
    log = home / "logs" / "server.log"
    log.unlink(missing_ok=True)
    proc = subprocess.Popen([str(code / "scripts" / "lore-launch"), "mcp"], env=env, cwd=project,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    db = str(home / "memory.db")

    def answer(prompt: str) -> str:
        found = ask(str(home), db, {"prompt": prompt, "seen": [], "cwd": str(project)}, 2.0)
        return str((found or {}).get("context") or "")

    try:
        if not wait_for(lambda: log.exists() and "warm in" in log.read_text(), 120):
            raise SystemExit(f"{label}: the server did not warm up")
        # This checkout opens the space in the background; the base never reads it.
        wait_for(lambda: HUB_FACT in answer(PROMPT), 10 if label == "before" else 60)
        times, with_hub = [], 0
        for i in range(PROMPTS):
            started = time.monotonic()
            context = answer(f"{PROMPT} (take {tag}-{i})")
            times.append(time.monotonic() - started)
            with_hub += HUB_FACT in context
        return times, with_hub
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True, help="the 'before' checkout")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lore-bench-"))
    pg = Path(tempfile.mkdtemp(prefix="lore-bench-hub-"))
    server = dev.start(pg)
    try:
        init_hub(server.url)
        home, project = work / "home", work / "billing"
        project.mkdir(parents=True)
        embedder = LocalEmbedder(MODEL_CACHE)
        for store, fact in ((home / "memory.db", LOCAL_FACT),
                            (HubStore(server.url, "bench", create_space=True), HUB_FACT)):
            memory = Memory(store, embedder, project=project_key(str(project)))
            store_knowledge(memory, fact, fact, None, 2, source="remember")
            memory.close()
        checkouts = {"before": args.base.resolve(), "after": ROOT}
        p50s: dict[str, list[float]] = {k: [] for k in checkouts}
        every: dict[str, list[float]] = {k: [] for k in checkouts}
        hub: dict[str, int] = dict.fromkeys(checkouts, 0)
        for r in range(args.rounds):
            for label in (["before", "after"] if r % 2 == 0 else ["after", "before"]):
                times, with_hub = timed_round(checkouts[label], home, project, server.url,
                                              label, f"{r}")
                p50s[label].append(statistics.median(times))
                every[label] += times
                hub[label] += with_hub
                print(f"round {r} {label}: p50 {statistics.median(times) * 1000:.1f} ms",
                      flush=True)
        rows = [[label, f"{statistics.median(p50s[label]) * 1000:.1f}",
                 f"{percentile(every[label], 95) * 1000:.1f}",
                 f"{hub[label]}/{len(every[label])}"] for label in checkouts]
        print(table("in-process per-prompt answer (ms)",
                    ["checkout", "p50 (median of rounds)", "p95", "answers with the hub note"],
                    rows))
        write_json(args.json, "prompt_hub_inprocess",
                   {label: {"p50_ms_per_round": [round(p * 1000, 2) for p in p50s[label]],
                            "p95_ms": round(percentile(every[label], 95) * 1000, 2),
                            "with_hub_note": hub[label], "answers": len(every[label])}
                    for label in checkouts})
    finally:
        dev.stop(pg)
        shutil.rmtree(pg, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
