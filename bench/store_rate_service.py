"""bench_store_rate.py's `--service` measurement: store_memory through a real memory service
and its socket, each caller a session of its own (a ServiceClient), as the issue's figure
asks. The child runs under the code being measured (base or new): its service is started
with that code on PYTHONPATH, on a private home, and stopped (SIGTERM, drained) at the end.

Answered: the clock from the first request to the last answer. Placed: until the store
journal (new code) is empty; the base has none, so placed = answered there."""

from __future__ import annotations

import os
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def measure(root: Path, db: Path, callers: int, work: list[tuple[str, str]], project: str,
            model_cache: Path) -> dict[str, Any]:
    from lore_plugin.embedding.embedder import assemble_from_packages

    model_dir = assemble_from_packages(model_cache / "all-MiniLM-L6-v2")
    home = Path(tempfile.mkdtemp(prefix="lore-bench-home-"))
    os.environ.update({"LORE_HOME": str(home), "LORE_DB_PATH": str(db),
                       "LORE_EMBED_MODEL_DIR": str(model_dir), "LORE_NO_DOWNLOAD": "1",
                       "LORE_SERVICE": "on", "PYTHONPATH": str(root)})
    os.environ.pop("LORE_CONFIG", None)
    from lore_plugin.service.client import ServiceClient

    def client() -> ServiceClient:
        return ServiceClient(str(home), str(db), project)

    first = client()
    pid = first.request("status")["pid"]
    # The model and the index warm before the clock, as a served session finds them.
    first.request("tool", {"name": "query_memory", "arguments": {"topic": "warm up"}})
    time.sleep(2.0)  # the warm-up's backfill and checks done
    total = len(work)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(callers + 1)

    def caller() -> None:
        mine = client()
        start.wait()
        while True:
            with lock:
                if not work:
                    return
                content, summary = work.pop()
            began = time.perf_counter()
            answer = mine.request("tool", {"name": "store_memory", "arguments": {
                "content": content, "summary": summary}})
            with lock:
                latencies.append(time.perf_counter() - began)
                if answer.get("isError"):
                    errors.append(str(answer["content"])[:200])

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    answered = time.perf_counter() - began
    while _journal_left(db) and time.perf_counter() - began < 600:
        time.sleep(0.02)
    placed = time.perf_counter() - began
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    return {"mode": "service", "callers": callers, "stores": total,
            "per_s": round(total / answered, 1),
            "placed_per_s": round(total / max(placed, answered), 1),
            "p50_ms": round(statistics.median(latencies) * 1000, 1), "errors": errors,
            "decisions": {}}


def _journal_left(db: Path) -> int:
    path = db.with_name(db.name + ".storejournal")
    if not path.exists():
        return 0
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return int(con.execute("SELECT count(*) FROM store_journal").fetchone()[0])
    except sqlite3.OperationalError:  # not made yet
        return 0
    finally:
        con.close()
