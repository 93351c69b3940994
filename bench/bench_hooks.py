"""Hook latency, whole process, as Claude Code sees it: through scripts/lore-launch, timed
until the hook's stdout and stderr close. Each hook is compared with a bare `python3 -c pass`
measured in the same run, because this machine's absolute speed varies.

    python bench/bench_hooks.py [--runs 30] [--json bench/results/hooks.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, bench_env, summary_ms, table, write_json

from lore_plugin.config import Settings
from lore_plugin.history import record_if_first_run
from lore_plugin.memory import Memory
from tests.transcripts import TranscriptWriter

LAUNCH = ROOT / "scripts" / "lore-launch"
SETTLE = 0.6  # seconds; a worker with no LLM to call exits well within this
TARGETS = {"stop (no batch due)": "p50 ≤ 40 ms", "stop (batch due)": "p50 ≤ 60 ms",
           "session-end": "always < 500 ms", "session-start (with brief)": "p50 ≤ 150 ms"}


def timed(cmd: list[str], stdin: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, capture_output=True, check=True)
    return time.perf_counter() - started


def prepare(tmp: Path) -> tuple[dict[str, str], dict[str, bytes]]:
    home = tmp / "lore"
    memory = Memory(home / "memory.db", None, project=str(tmp / "proj"))
    for i in range(12):
        topic = memory.store(f"Topic {i} notes", f"Topic number {i}", depth=0)
        memory.store(f"Concept under topic {i}", f"Concept {i}", parent_id=topic.id, depth=1)
    memory.close()
    # Lore has run before: the transcripts below are new, not history from before its first run.
    record_if_first_run(Settings(db_path=home / "memory.db", home=home), tmp / "projects")
    quiet = TranscriptWriter(tmp / "projects" / "p" / "quiet.jsonl", cwd=str(tmp / "proj"))
    quiet.exchange(3)
    busy = TranscriptWriter(tmp / "projects" / "p" / "busy.jsonl", cwd=str(tmp / "proj"))
    busy.exchange(25)
    # No API key and no claude CLI: spawned workers stop at once, the hooks are what is timed.
    env = bench_env(LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"),
                    LORE_PYTHON=sys.executable, HOME=str(tmp / "home"),
                    LORE_CLAUDE_PROJECTS=str(tmp / "projects"), PATH="/usr/bin:/bin")
    env.pop("ANTHROPIC_API_KEY", None)

    def payload(writer: TranscriptWriter, event: str, **extra: object) -> bytes:
        return json.dumps({"session_id": writer.session, "transcript_path": str(writer.path),
                           "cwd": writer.cwd, "hook_event_name": event, **extra}).encode()

    return env, {
        "stop (no batch due)": payload(quiet, "Stop", stop_hook_active=False),
        "stop (batch due)": payload(busy, "Stop", stop_hook_active=False),
        "session-end": payload(quiet, "SessionEnd", reason="other"),
        "session-start (with brief)": payload(quiet, "SessionStart", source="startup"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env, payloads = prepare(Path(tmp))
        events = {"stop (no batch due)": "stop", "stop (batch due)": "stop",
                  "session-end": "session-end", "session-start (with brief)": "session-start"}
        bare_cmd = [sys.executable, "-c", "pass"]
        samples: dict[str, list[float]] = {"bare python -c pass": []} | {k: [] for k in events}
        for name, event in events.items():  # warm caches (.pyc, page cache) once
            timed([str(LAUNCH), "hook", event], payloads[name], env)
        for _ in range(args.runs):  # interleaved, so load spikes hit every row alike
            samples["bare python -c pass"].append(timed(bare_cmd, b"", env))
            for name, event in events.items():
                samples[name].append(timed([str(LAUNCH), "hook", event], payloads[name], env))
                if name != "stop (no batch due)":
                    time.sleep(SETTLE)  # let the detached worker finish before the next timing
        time.sleep(1.0)  # let the detached workers finish before the folder goes
    bare = statistics.median(samples["bare python -c pass"])
    results = {name: {**summary_ms(s), "max_ms": round(max(s) * 1000, 2),
                      "ratio_to_bare": round(statistics.median(s) / bare, 2)}
               for name, s in samples.items()}
    rows = [[name, r["p50_ms"], r["p95_ms"], r["max_ms"], r["ratio_to_bare"], TARGETS.get(name, "")]
            for name, r in results.items()]
    print(table(f"Hook latency, whole process, {args.runs} runs each",
                ["hook", "p50 ms", "p95 ms", "max ms", "× bare", "target"], rows))
    write_json(args.json, "hooks", {"results": results})


if __name__ == "__main__":
    main()
