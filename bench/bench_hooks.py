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

from lore_plugin.capture.history import record_if_first_run
from lore_plugin.core.config import Settings
from lore_plugin.recall.memory import Memory
from tests.transcripts import TranscriptWriter

LAUNCH = ROOT / "scripts" / "lore-launch"
SETTLE = 0.6  # seconds; a worker with no LLM to call exits well within this
TARGETS = {"stop (no batch due)": "p50 ≤ 40 ms", "stop (batch due)": "p50 ≤ 60 ms",
           "session-end": "always < 500 ms", "session-start (with brief)": "p50 ≤ 150 ms"}
PROMPT_TARGET = "p50 ≤ 80 ms, p95 ≤ 150 ms"
# UserPromptSubmit rows: (prompt, whether a server is running). Each run is a new session, so
# a matching prompt injects every time (a session never gets the same fragment twice).
PROMPTS = {"user-prompt (server, match)": ("When is the billing deploy window?", True),
           "user-prompt (server, no match)": ("How do I parse a JSON file in Rust?", True),
           "user-prompt (no server, match)": ("When is the billing deploy window?", False),
           "user-prompt (no server, no match)": ("How do I parse a JSON file in Rust?", False)}


def timed(cmd: list[str], stdin: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, capture_output=True, check=True)
    return time.perf_counter() - started


def prepare(tmp: Path) -> tuple[dict[str, str], dict[str, bytes]]:
    home = tmp / "lore"
    memory = Memory(home / "memory.db", None, project=str(tmp / "proj"))
    for i in range(12):
        topic = memory.store(f"Topic {i} notes", f"Topic number {i}", depth=0)
        concept = memory.store(f"Concept under topic {i}", f"Concept {i}", parent_id=topic.id,
                               depth=1)
        for j in range(20):
            memory.store(f"Fact {j} of concept {i}: value {i * 100 + j}.", f"Fact {i}.{j}",
                         parent_id=concept.id, depth=2)
    billing = memory.store("How billing ships", "Billing deployment", depth=0)
    window = memory.store("When deploys may happen", "Deploy window", parent_id=billing.id,
                          depth=1)
    memory.store("Agreed in conversation: deploys happen Thursday 09:00 UTC.",
                 "The billing deploy window is Thursday 09:00 UTC", parent_id=window.id, depth=2)
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


def start_server(env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """The MCP server as Claude Code starts it; returns once it is warm."""
    from lore_plugin.embedding.embedder import assemble_from_packages

    model = assemble_from_packages(ROOT / "bench" / ".cache" / "models" / "all-MiniLM-L6-v2")
    server = subprocess.Popen([str(LAUNCH), "mcp"], cwd=cwd, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**env, "LORE_EMBED_MODEL_DIR": str(model),
                                   "LORE_NO_DOWNLOAD": "1"})
    log = Path(env["LORE_HOME"]) / "logs" / "server.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "warm in" in log.read_text()):
        if time.monotonic() > deadline:
            server.kill()
            raise SystemExit("the MCP server did not warm up")
        time.sleep(0.2)
    return server


def prompt_payload(prompt: str, run: int, cwd: str) -> bytes:
    return json.dumps({"session_id": f"bench-{run}", "prompt": prompt, "cwd": cwd,
                       "hook_event_name": "UserPromptSubmit",
                       "transcript_path": "/nonexistent/t.jsonl"}).encode()


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
        samples: dict[str, list[float]] = ({"bare python -c pass": []} | {k: [] for k in events}
                                           | {k: [] for k in PROMPTS})
        # No server: the same database, but a home where no server has announced itself.
        alone = {**env, "LORE_HOME": str(Path(tmp) / "alone")}
        server = start_server(env, Path(tmp))
        hook = [str(LAUNCH), "hook", "user-prompt"]
        try:
            for name, event in events.items():  # warm caches (.pyc, page cache) once
                timed([str(LAUNCH), "hook", event], payloads[name], env)
            for name, (prompt, served) in PROMPTS.items():  # each row does what it says
                out = subprocess.run(hook, input=prompt_payload(prompt, -1, tmp),
                                     env=env if served else alone, capture_output=True).stdout
                if (b"Thursday 09:00" in out) != ("no match" not in name):
                    raise SystemExit(f"{name}: unexpected hook output {out[:200]!r}")
            for run in range(args.runs):  # interleaved, so load spikes hit every row alike
                samples["bare python -c pass"].append(timed(bare_cmd, b"", env))
                for name, (prompt, served) in PROMPTS.items():
                    samples[name].append(timed(hook, prompt_payload(prompt, run, tmp),
                                               env if served else alone))
                for name, event in events.items():
                    samples[name].append(timed([str(LAUNCH), "hook", event], payloads[name], env))
                    if name != "stop (no batch due)":
                        time.sleep(SETTLE)  # let the detached worker finish before the next timing
        finally:
            server.stdin.close()  # type: ignore[union-attr]
            server.wait(timeout=30)
        time.sleep(1.0)  # let the detached workers finish before the folder goes
    bare = statistics.median(samples["bare python -c pass"])
    results = {name: {**summary_ms(s), "max_ms": round(max(s) * 1000, 2),
                      "ratio_to_bare": round(statistics.median(s) / bare, 2)}
               for name, s in samples.items()}
    rows = [[name, r["p50_ms"], r["p95_ms"], r["max_ms"], r["ratio_to_bare"],
             TARGETS.get(name, PROMPT_TARGET if name in PROMPTS else "")]
            for name, r in results.items()]
    print(table(f"Hook latency, whole process, {args.runs} runs each",
                ["hook", "p50 ms", "p95 ms", "max ms", "× bare", "target"], rows))
    write_json(args.json, "hooks", {"results": results})


if __name__ == "__main__":
    main()
