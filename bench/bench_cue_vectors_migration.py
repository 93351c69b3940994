"""Schema 11 (issue 30, cue vectors) on the 100K bench database: how long the migration takes
the first time a writable Store opens the file, and what the due read costs afterwards.

    python bench/bench_cue_vectors_migration.py [--source bench/.cache/bench-100000-v1.db] \
        [--runs 3] [--json PATH]

Two schema-10 templates are made once from the source (copied through SQLite's backup, the
original untouched, then migrated to 10): "no cues" as the bench database is (its notes
have none), and "all cued" with two cue phrases on every fact and detail (depth >= 2), the
most the migration can have to mark due. Each run copies a template and times `Store(copy)`
from open to migrated (schema 11), alternating the two. Then, on the migrated copies: the due
read (`cue_vectors_due(64)`) with everything due, and with nothing due (every row given a
blob by SQL, as after a fill), and the judge's read of 20 candidates' blobs (`cue_vectors`).
Medians are printed."""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import apsw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import table, write_json  # noqa: E402

from lore_plugin.store import Store  # noqa: E402
from lore_plugin.store.schema import MIGRATIONS  # noqa: E402

DEFAULT_SOURCE = ROOT / "bench" / ".cache" / "bench-100000-v1.db"
CUED = ("'setting of ' || substr(summary, 1, 40) || char(10) || "
        "'how does ' || substr(summary, 1, 30) || ' work'")


def template(source: Path, dest: Path, cued: bool) -> int:
    """A schema-10 copy of the source; with `cued`, cues on every fact and detail."""
    src = apsw.Connection(f"file:{source}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY
                          | apsw.SQLITE_OPEN_URI)
    out = apsw.Connection(str(dest))
    with out.backup("main", src, "main") as b:
        b.step()
    src.close()
    out.close()
    conn = apsw.Connection(str(dest))  # not a Store: that would migrate to the newest
    conn.execute("PRAGMA journal_mode=WAL")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    for number in range(version, 10):
        with conn:
            conn.execute(MIGRATIONS[number])
            conn.execute(f"PRAGMA user_version={number + 1}")
    if cued:
        with conn:
            conn.execute(f"UPDATE fragments SET cues = {CUED} WHERE depth >= 2")
    count = int(conn.execute("SELECT count(*) FROM fragments WHERE cues != ''").fetchone()[0])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 10
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return count


def copy(path: Path, to: Path) -> Path:
    shutil.copyfile(path, to)
    return to


def timed(fn, *args: object) -> tuple[float, object]:  # noqa: ANN001
    started = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - started, value


def one_run(path: Path, cued: int, reads: dict[str, list[float]]) -> float:
    """Opens (migrates) the copy; on a cued copy, times the reads too. Returns the open."""
    seconds, opened = timed(Store, path)
    store: Store = opened  # type: ignore[assignment]
    try:
        assert store.user_version() == 11 and store.cue_vectors_due_count() == cued
        if cued:
            reads["due read, all due"].append(timed(store.cue_vectors_due, 64)[0])
            with store.write():  # as after a fill: every row has its blob
                store.conn.execute("UPDATE cue_vectors SET vectors = zeroblob(1552)")
            ids = [r[0] for r in store.conn.execute(
                "SELECT fragment_id FROM cue_vectors ORDER BY random() LIMIT 20")]
            reads["due read, none due"].append(timed(store.cue_vectors_due, 64)[0])
            reads["20 candidates' blobs"].append(timed(store.cue_vectors, ids)[0])
    finally:
        store.close()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cue-vectors-migration-"))
    try:
        cued_rows = {}
        for name, cued in (("no cues", False), ("all cued", True)):
            cued_rows[name] = template(args.source, work / f"{name}.db", cued)
        took: dict[str, list[float]] = {name: [] for name in cued_rows}
        reads: dict[str, list[float]] = {"due read, all due": [], "due read, none due": [],
                                         "20 candidates' blobs": []}
        for run in range(args.runs):
            order = list(cued_rows) if run % 2 == 0 else list(reversed(cued_rows))
            for name in order:
                path = copy(work / f"{name}.db", work / "run.db")
                took[name].append(one_run(path, cued_rows[name], reads))
                for extra in ("", "-wal", "-shm"):
                    Path(str(path) + extra).unlink(missing_ok=True)
        rows = [[name, f"{cued_rows[name]:,}", ", ".join(f"{t:.2f}" for t in took[name]),
                 f"{statistics.median(took[name]):.2f}"] for name in took]
        print(table(f"schema 11 migration ({args.runs} runs, seconds)",
                    ["template", "notes with cues", "runs", "median"], rows))
        print(table("reads on the migrated 100K (ms, medians)", ["read", "median ms"],
                    [[k, f"{statistics.median(v) * 1000:.3f}"] for k, v in reads.items()]))
        write_json(args.json, "cue_vectors_migration", {"cued": cued_rows, "runs": took,
                                                        "reads": reads})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
