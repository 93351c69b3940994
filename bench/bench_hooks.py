"""Hook latency, whole process, as Claude Code sees it: through scripts/lore-launch, timed
until the hook's stdout and stderr close. Each hook is compared with a bare `python -c pass`
of the same interpreter, measured in the same run, because this machine's absolute speed varies.

The interpreter is install-like by default: a throwaway venv of the same Python whose
site-packages lists this venv's packages and the checkout as plain paths. An editable install
(as in a development venv) runs an import finder at every start-up that imports re, pathlib
and urllib, about 10 ms: it slows the bare start as much as the hooks and hides what the hooks
import, so ratios measured with it say little about a real install (scripts/lore-launch's
venv, where Lore is installed normally). `--as-is` times sys.executable instead.

`--base DIR` times another checkout's hooks too (say a `git worktree` of main), alternating
with this one's in every run, each through its own install-like venv.

    python bench/bench_hooks.py [--runs 30] [--base /tmp/base] [--only stop] [--as-is]
                                [--json bench/results/hooks.json]
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import sysconfig
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


CPU: dict[str, list[float]] = {}  # CPU seconds (user + system) of each timed process, by row


def timed(cmd: list[str], stdin: bytes, env: dict[str, str], row: str = "") -> float:
    """Wall seconds until the hook's pipes close; its CPU time goes to CPU[row]. On a busy
    machine the CPU time is the steadier figure: waiting for a core does not count in it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(row, []).append(after.ru_utime + after.ru_stime
                                   - before.ru_utime - before.ru_stime)
    return wall


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
    """The memory service the per-prompt hook asks (issue 27: the MCP front starts it only
    when a session first speaks to it), in the foreground so that killing it ends it;
    returns once it is warm."""
    from lore_plugin.embedding.embedder import assemble_from_packages

    model = assemble_from_packages(ROOT / "bench" / ".cache" / "models" / "all-MiniLM-L6-v2")
    server = subprocess.Popen([env.get("LORE_PYTHON", sys.executable), "-m",
                               "lore_plugin.service"], cwd=cwd, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**env, "LORE_EMBED_MODEL_DIR": str(model),
                                   "LORE_NO_DOWNLOAD": "1", "PYTHONPATH": str(ROOT)})
    # The memory service (issue 27) logs its warm-up to logs/service.log, a server before it
    # to logs/server.log.
    logs = Path(env["LORE_HOME"]) / "logs"
    deadline = time.monotonic() + 120
    while not any("warm in" in log.read_text(errors="replace") for log in logs.glob("*.log")):
        if time.monotonic() > deadline:
            server.kill()
            raise SystemExit("the MCP server did not warm up")
        time.sleep(0.2)
    return server


def install_like_python(venv: Path, checkout: Path) -> str:
    """A venv of this Python that imports `checkout` and this venv's packages through plain
    .pth paths, with no editable-install finder; returns its interpreter."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "deps.pth").write_text("\n".join(paths) + "\n")
    (site / "lore.pth").write_text(f"{checkout}\n")
    return str(venv / "bin" / "python")


def prompt_payload(prompt: str, run: int | str, cwd: str) -> bytes:
    return json.dumps({"session_id": f"bench-{run}", "prompt": prompt, "cwd": cwd,
                       "hook_event_name": "UserPromptSubmit",
                       "transcript_path": "/nonexistent/t.jsonl"}).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--base", help="another checkout whose hooks are timed alternately")
    parser.add_argument("--only", help="time only the rows whose name matches this regex")
    parser.add_argument("--as-is", action="store_true",
                        help="time sys.executable (an editable install's finder included)")
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env, payloads = prepare(Path(tmp))
        events = {"stop (no batch due)": "stop", "stop (batch due)": "stop",
                  "session-end": "session-end", "session-start (with brief)": "session-start"}
        prompts = dict(PROMPTS)
        if args.only:
            events = {k: v for k, v in events.items() if re.search(args.only, k)}
            prompts = {k: v for k, v in prompts.items() if re.search(args.only, k)}
        # (label suffix, interpreter, launcher, environment) for each checkout timed
        checkouts = {"": ROOT} | ({" [base]": Path(args.base).resolve()} if args.base else {})
        runners = []
        for suffix, checkout in checkouts.items():
            if args.as_is:
                python, extra = sys.executable, {"PYTHONPATH": str(checkout)}
            else:
                python = install_like_python(Path(tmp) / f"venv{len(runners)}", checkout)
                extra = {}
            run_env = {k: v for k, v in env.items() if k != "PYTHONPATH"} | extra
            runners.append((suffix, python, checkout / "scripts" / "lore-launch",
                            run_env | {"LORE_PYTHON": python}))
        bare = "bare python -c pass"
        samples: dict[str, list[float]] = {bare: []}
        for suffix, *_ in runners:
            samples |= {k + suffix: [] for k in [*events, *prompts]}
        # No server: the same database, but a home where no server has announced itself.
        alone_home = str(Path(tmp) / "alone")
        server = start_server(env, Path(tmp)) if any(s for _, s in prompts.values()) else None
        try:
            for suffix, _, launch, run_env in runners:
                for name, event in events.items():  # warm caches (.pyc, page cache) once
                    timed([str(launch), "hook", event], payloads[name], run_env)
                for name, (prompt, served) in prompts.items():  # each row does what it says
                    # (twice: a first start that writes .pyc files can miss the server's deadline)
                    for attempt in range(2):  # a new session each: none is answered twice
                        out = subprocess.run([str(launch), "hook", "user-prompt"],
                                             input=prompt_payload(prompt, f"w{attempt}{len(suffix)}", tmp),
                                             env=run_env if served else
                                             run_env | {"LORE_HOME": alone_home},
                                             capture_output=True).stdout
                    if (b"Thursday 09:00" in out) != ("no match" not in name):
                        raise SystemExit(f"{name}{suffix}: unexpected hook output {out[:200]!r}")
            for run in range(args.runs):  # interleaved, so load spikes hit every row alike
                samples[bare].append(timed([runners[0][1], "-c", "pass"], b"", runners[0][3],
                                           bare))
                for suffix, _, launch, run_env in runners:
                    for name, (prompt, served) in prompts.items():
                        samples[name + suffix].append(timed(
                            [str(launch), "hook", "user-prompt"],
                            prompt_payload(prompt, f"{run}{len(suffix)}", tmp),
                            run_env if served else run_env | {"LORE_HOME": alone_home},
                            name + suffix))
                    for name, event in events.items():
                        samples[name + suffix].append(
                            timed([str(launch), "hook", event], payloads[name], run_env,
                                  name + suffix))
                        if name != "stop (no batch due)":
                            time.sleep(SETTLE)  # let the detached worker finish first
        finally:
            if server is not None:
                server.terminate()  # the service drains and exits on SIGTERM
                server.wait(timeout=30)
        time.sleep(1.0)  # let the detached workers finish before the folder goes
    bare_p50, bare_cpu = statistics.median(samples[bare]), statistics.median(CPU[bare])
    results = {name: {**summary_ms(s), "max_ms": round(max(s) * 1000, 2),
                      "ratio_to_bare": round(statistics.median(s) / bare_p50, 2),
                      "cpu_p50_ms": round(statistics.median(CPU[name]) * 1000, 2),
                      "cpu_ratio_to_bare": round(statistics.median(CPU[name]) / bare_cpu, 2)}
               for name, s in samples.items()}
    rows = [[name, r["p50_ms"], r["p95_ms"], r["max_ms"], r["ratio_to_bare"], r["cpu_p50_ms"],
             r["cpu_ratio_to_bare"],
             TARGETS.get(name.split(" [")[0],
                         PROMPT_TARGET if name.split(" [")[0] in PROMPTS else "")]
            for name, r in results.items()]
    kind = "as-is" if args.as_is else "install-like"
    print(table(f"Hook latency, whole process, {args.runs} runs each ({kind} interpreter)",
                ["hook", "p50 ms", "p95 ms", "max ms", "× bare", "CPU p50 ms", "CPU × bare",
                 "target"], rows))
    write_json(args.json, "hooks", {"interpreter": kind, "base": args.base, "results": results})


if __name__ == "__main__":
    main()
