"""One process of the concurrency soak test (tests/test_soak.py). Each role loops until its
deadline and writes one JSON line per outcome to its report file:
{"stored": summary} for every write it made, {"error": text} for anything that went wrong,
an answer that lacks what it must say included (a query that stops finding what was just
stored is a failure even when it is not an error).

The roles start their clock together: each, once ready (an MCP server up and answering),
leaves a file in the gate folder and waits for the test's "go" file, whose time plus the
soak's length is every role's deadline. A slow start on a loaded machine then cannot eat
the window the soak is meant to share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio


def report(out: Path, **record: str) -> None:
    with open(out, "a") as fh:
        fh.write(json.dumps(record) + "\n")


GATE_WAIT = 300.0  # seconds a ready role waits for the test's go before it gives up


def wait_for_go(gate: Path, name: str, seconds: float) -> float:
    """Marks this role ready, waits for the go file and returns the shared deadline."""
    (gate / f"{name}.ready").touch()
    go = gate / "go"
    give_up = time.time() + GATE_WAIT
    while not go.exists():
        if time.time() > give_up:
            raise TimeoutError("the test never said go")
        time.sleep(0.05)
    return float(go.read_text()) + seconds


def merged_away(summary: str) -> bool:
    """Whether consolidation, running alongside, has merged the note into another since it
    was stored: then a query rightly shows the survivor instead (the test still finds the
    note itself in the database at the end)."""
    from lore_plugin.core.config import load_settings
    from lore_plugin.store import Store

    store = Store(load_settings().db_path, readonly=True)
    try:
        return bool(store.execute("SELECT 1 FROM fragments WHERE summary = ? AND superseded_by "
                                  "IS NOT NULL", (summary,)))
    finally:
        store.close()


async def mcp_role(name: str, gate: Path, seconds: float, out: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "lore_plugin.server"],
                                   env=dict(os.environ), cwd=os.getcwd())
    async with Client(params, mode="legacy", read_timeout_seconds=60) as client:
        await client.call_tool("query_memory", {"topic": "warm up"})  # the service is up
        deadline = await anyio.to_thread.run_sync(wait_for_go, gate, name, seconds)
        i = 0
        while time.time() < deadline:
            summary = f"soak {name} note {i}"
            # Each call with what its answer must hold: the new note, found again by its
            # own words, and a topic list that shows the soak's notes.
            calls = [("store_memory", {"content": f"{summary}: the value is {i * 13}",
                                       "summary": summary, "depth": 0},
                      ("Stored [", f"· {summary}")),
                     ("query_memory", {"topic": f"{summary} value", "depth": 0},
                      (f"· {summary}", f"{summary}: the value is {i * 13}")),
                     ("list_topics", {}, ("soak ",))]
            for tool, args, expected in calls:
                result = await client.call_tool(tool, args)
                text = " ".join(b.text for b in result.content if b.type == "text")
                if result.is_error:
                    report(out, error=f"{tool}: {text}")
                elif (lacking := [e for e in expected if e.lower() not in text.lower()]
                      ) and not (tool == "query_memory" and merged_away(summary)):
                    report(out, error=f"{tool}: the answer lacks {lacking}: {text[:400]}")
                elif tool == "store_memory":
                    report(out, stored=summary)
            i += 1


def cli_role(name: str, deadline: float, out: Path) -> None:
    i = 0
    while time.time() < deadline:
        summary = f"soak {name} fact {i}"
        done = subprocess.run([sys.executable, "-m", "lore_plugin.cli", "remember", "--topic",
                               f"Soak {name}", "--summary", summary, f"{summary} is recorded."],
                              capture_output=True, text=True, timeout=120)
        if done.returncode:
            report(out, error=f"cli: {done.stderr.strip()}")
        else:
            report(out, stored=summary)
        query = subprocess.run([sys.executable, "-m", "lore_plugin.cli", "recall", summary],
                               capture_output=True, text=True, timeout=120)
        if query.returncode:
            report(out, error=f"cli recall: {query.stderr.strip()}")
        elif summary not in query.stdout and not merged_away(summary):
            report(out, error=f"cli recall: the answer lacks {summary!r}: {query.stdout[:400]}")
        i += 1


def ingest_role(name: str, deadline: float, out: Path, transcript: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.transcripts import TranscriptWriter

    writer = TranscriptWriter(transcript, session=f"soak-{name}")
    i = 0
    while time.time() < deadline:
        for _ in range(3):
            writer.user(f"{name} rule {i} uses value {i * 7}")
            writer.assistant(f"ok {i}", tool=False)
            report(out, stored=f"{name} rule {i} uses value {i * 7}")
            i += 1
        done = subprocess.run([sys.executable, "-m", "lore_plugin.worker", "ingest", str(transcript)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode:
            report(out, error=f"worker: {done.stderr.strip()[-500:]}")
    subprocess.run([sys.executable, "-m", "lore_plugin.worker", "ingest", str(transcript)],
                   capture_output=True, timeout=120)


def consolidate_role(deadline: float, out: Path) -> None:
    while time.time() < deadline:
        done = subprocess.run([sys.executable, "-m", "lore_plugin.worker", "consolidate"],
                              capture_output=True, text=True, timeout=120)
        if done.returncode:
            report(out, error=f"consolidate: {done.stderr.strip()[-500:]}")


def main() -> None:
    role, name, seconds, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), Path(sys.argv[4])
    gate = out.parent / "gate"
    try:
        if role == "mcp":
            anyio.run(mcp_role, name, gate, seconds, out)
            return
        deadline = wait_for_go(gate, name, seconds)
        if role == "cli":
            cli_role(name, deadline, out)
        elif role == "ingest":
            ingest_role(name, deadline, out, Path(sys.argv[5]))
        else:
            consolidate_role(deadline, out)
    except Exception as exc:  # the test reads this as a failure
        report(out, error=f"{role} driver crashed: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
