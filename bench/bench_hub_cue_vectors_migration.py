"""Hub migration 8 (issue 30, cue vectors) on a filled hub: how long `lore hub init` takes,
how long a writer and a reader of `fragments` wait meanwhile, and that `fragments` is not
rewritten.

    python bench/bench_hub_cue_vectors_migration.py --base /tmp/base \
        --source bench/.cache/bench-100000-v1.db [--rows 10000] [--runs 3] [--json PATH]

The source's first ROWS fragments are pushed with the old checkout's code (--base, schema 7)
into a throwaway server (`lore hub dev`'s PostgreSQL 18 + pgvector), as
bench_hub_cues_migration.py does, every live fact and detail (depth >= 2) given three cue
phrases first, as the cycle's cue writing would have. Each run clones that database
(CREATE DATABASE .. TEMPLATE) and times this checkout's `init_hub` on it while two probes
run against the clone on their own connections, one statement after another: a writer
(an UPDATE of one fragment's metadata) and a reader (one fragment by id). The longest
statement of each during the migration is the time it was held up. Each migrated clone is
checked: one due row per fragment with cues, none other, and `fragments` kept its file
(pg_class.relfilenode: a rewrite gives the table a new one). Medians are printed."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / "bench" / ".cache"
# Three phrases a note, made from its own text (SQLite's || and char(10): a newline).
CUES = ("'how do I ' || trim(lower(substr(summary, 1, 40))) || char(10) || 'where is ' || "
        "substr(id, 1, 8) || ' configured' || char(10) || 'why ' || "
        "trim(lower(substr(content, 1, 30)))")


def _url(server: str, database: str) -> str:
    return conninfo.make_conninfo(server, dbname=database)


def give_cues(local: Path) -> int:
    """Three phrases on every live fact and detail of the local file, before it is pushed:
    the push carries them, as it carries a real memory's."""
    import sqlite3

    conn = sqlite3.connect(local)
    with conn:
        changed = conn.execute(f"UPDATE fragments SET cues = {CUES} WHERE depth >= 2 AND "
                               "superseded_by IS NULL").rowcount
    conn.close()
    return changed


class Probe(threading.Thread):
    """One statement after another on its own connection until stopped; keeps each
    statement's (start, seconds)."""

    def __init__(self, url: str, sql: str, params: tuple[Any, ...]) -> None:
        super().__init__(daemon=True)
        self.url, self.sql, self.params = url, sql, params
        self.stop = threading.Event()
        self.times: list[tuple[float, float]] = []

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                started = time.perf_counter()
                conn.execute(self.sql, self.params)
                self.times.append((started, time.perf_counter() - started))
                time.sleep(0.002)

    def longest(self, start: float, end: float) -> float:
        """The longest statement that overlapped [start, end]."""
        return max((s for t, s in self.times if t <= end and t + s >= start), default=0.0)


def migrate(server: str, name: str) -> dict[str, Any]:
    from lore_plugin.hub import init_hub

    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE filled")
    url = _url(server, name)
    with psycopg.connect(url) as conn:
        space, fid = conn.execute("SELECT space, id FROM fragments WHERE depth = 2 LIMIT 1"
                                  ).fetchone()  # type: ignore[misc]
        file_before = conn.execute("SELECT relfilenode FROM pg_class WHERE relname = "
                                   "'fragments'").fetchone()
    writer = Probe(url, "UPDATE fragments SET metadata = metadata WHERE space = %s AND id = %s",
                   (space, fid))
    reader = Probe(url, "SELECT summary FROM fragments WHERE space = %s AND id = %s", (space, fid))
    writer.start()
    reader.start()
    time.sleep(0.3)  # both warm
    started = time.perf_counter()
    assert init_hub(url, ()) == 1
    ended = time.perf_counter()
    time.sleep(0.2)
    writer.stop.set()
    reader.stop.set()
    writer.join()
    reader.join()
    with psycopg.connect(url) as conn:
        with_cues = conn.execute("SELECT count(*) FROM fragments WHERE cues <> ''").fetchone()[0]  # type: ignore[index]
        due = conn.execute("SELECT count(*) FROM cue_vectors c JOIN fragments f ON f.space = "
                           "c.space AND f.id = c.fragment_id WHERE c.vectors IS NULL AND "
                           "f.cues <> ''").fetchone()[0]  # type: ignore[index]
        rows = conn.execute("SELECT count(*) FROM cue_vectors").fetchone()[0]  # type: ignore[index]
        file_after = conn.execute("SELECT relfilenode FROM pg_class WHERE relname = "
                                  "'fragments'").fetchone()
        size = conn.execute("SELECT pg_total_relation_size('cue_vectors')").fetchone()[0]  # type: ignore[index]
    assert with_cues == due == rows and file_before == file_after, (with_cues, due, rows)
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return {"seconds": ended - started, "writer_wait": writer.longest(started, ended),
            "reader_wait": reader.longest(started, ended), "due": due,
            "table_kb": round(size / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True, help="the old checkout (schema 7)")
    parser.add_argument("--source", type=Path, default=CACHE_DIR / "bench-100000-v1.db")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_hub_cues_migration import first_rows
    from common import bench_env, table, write_json

    from lore_plugin.hub import dev

    work = Path(tempfile.mkdtemp(prefix="hub-cuevecs-"))
    server = dev.start(work / "hub")
    runs: list[dict[str, Any]] = []
    try:
        first_rows(args.source, args.rows, work / "source.db")
        cued = give_cues(work / "source.db")
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE filled")
        started = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "bench" / "bench_hub_cues_migration.py"),
                        "--fill", server.url, "filled", str(work / "source.db")],
                       env=bench_env(PYTHONPATH=str(args.base)), check=True, timeout=3600)
        print(f"  filled at schema 7 in {time.perf_counter() - started:.1f} s, {cued:,} "
              "fragments with cues", file=sys.stderr)
        for i in range(args.runs):
            runs.append(migrate(server.url, f"c{os.urandom(4).hex()}"))
            print(f"  run {i + 1}: {runs[-1]}", file=sys.stderr)
    finally:
        dev.stop(work / "hub")
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(table(f"hub migration 8 (cue vectors) on {args.rows:,} fragments "
                f"({args.runs} runs, medians)",
                ["fragments", "marked due", "migration s", "a writer waited s",
                 "a reader waited s", "cue_vectors KB"],
                [[f"{args.rows:,}", f"{med['due']:,.0f}", f"{med['seconds']:.2f}",
                  f"{med['writer_wait']:.2f}", f"{med['reader_wait']:.3f}",
                  f"{med['table_kb']:,.0f}"]]))
    write_json(args.json, "hub_cue_vectors_migration", {"rows": args.rows, "runs": runs,
                                                        "median": med})
    print(json.dumps(med))


if __name__ == "__main__":
    main()
