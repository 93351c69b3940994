"""Schemas 11 and 12 (issue 30, cue vectors) on the 100K bench database: how long the
migrations take the first time a writable Store opens the file, and, filled, the room the
vectors take and what the reads cost in 11's WITHOUT ROWID table and in 12's rowid table.

    python bench/bench_cue_vectors_migration.py [--source bench/.cache/bench-100000-v1.db] \
        [--runs 3] [--json PATH]

Two schema-10 templates are made once from the source (copied through SQLite's backup, the
original untouched, then migrated to 10): "no cues" as the bench database is (its notes
have none), and "all cued" with two cue phrases on every fact and detail (depth >= 2), the
most a migration can have to mark due. Each run, alternating the order:
- `Store(copy)` of each template from open to migrated (10 -> 12), timed;
- the cued copy so migrated (12's layout) filled as a fill writes (set_cue_vectors, 64
  notes a transaction, a blob of 2-5 phrases' size: no model, the bytes are zeros);
- another cued copy taken to 11 only (its SQL run by hand) and filled by the same SQL;
- on both, from a new connection: the due read with nothing due, and 20 random
  candidates' blobs read as the judge reads them (the first read, and the median of 20
  reads of other candidates); the file's size; then the 11 copy's `Store(copy)` (migration
  12 on a filled table, what a database that ran 11 pays), timed.
Medians are printed."""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
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
    if version > 10:  # the cache opened by a newer Lore: 11 and 12 only add cue_vectors
        assert version <= len(MIGRATIONS) == 12, version
        with conn:
            conn.execute("DROP TRIGGER fragments_cues_insert; DROP TRIGGER fragments_cues_update;"
                         " DROP TRIGGER fragments_cues_delete; DROP TABLE cue_vectors;"
                         " PRAGMA user_version=10")
        version = 10
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
    for extra in ("-wal", "-shm"):
        Path(str(to) + extra).unlink(missing_ok=True)
    return to


def timed(fn, *args: object) -> tuple[float, object]:  # noqa: ANN001
    started = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - started, value


def blob(fid: str) -> bytes:
    return bytes(388 * (2 + int(fid[:2], 16) % 4))  # 2-5 phrases (EMBED_DIM + a scale each)


def fill_as_11(path: Path) -> None:
    """Schema 11 by hand (a Store would go on to 12), then every due row filled with the
    statements set_cue_vectors runs."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    with conn:
        conn.execute(MIGRATIONS[10])
        conn.execute("PRAGMA user_version=11")
    while due := conn.execute("SELECT c.fragment_id, f.cues FROM cue_vectors c INDEXED BY "
                              "idx_cue_vectors_due JOIN fragments f ON f.id = c.fragment_id "
                              "WHERE c.vectors IS NULL LIMIT 64").fetchall():
        with conn:
            for fid, cues in due:
                conn.execute("UPDATE cue_vectors SET vectors = ?3 WHERE fragment_id = ?1 AND "
                             "EXISTS (SELECT 1 FROM fragments WHERE id = ?1 AND cues = ?2)",
                             (fid, cues, blob(fid)))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def fill_as_12(store: Store) -> None:
    while due := store.cue_vectors_due(64):
        store.set_cue_vectors([(fid, cues, blob(fid)) for fid, cues in due])
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def reads(path: Path, out: dict[str, list[float]], layout: str) -> None:
    """From a new connection, as the judge's process would read."""
    conn = apsw.Connection(str(path))
    ids = [r[0] for r in conn.execute("SELECT fragment_id FROM cue_vectors")]
    assert conn.execute("SELECT count(*) FROM cue_vectors WHERE vectors IS NULL").fetchone()[0] == 0
    rng = random.Random(7)
    sql = ("SELECT fragment_id, vectors FROM cue_vectors WHERE fragment_id IN "
           f"({','.join('?' * 20)}) AND vectors IS NOT NULL")
    first = timed(lambda: conn.execute(sql, rng.sample(ids, 20)).fetchall())[0]
    later = [timed(lambda: conn.execute(sql, rng.sample(ids, 20)).fetchall())[0]
             for _ in range(20)]
    none_due = timed(lambda: conn.execute(
        "SELECT c.fragment_id, f.cues FROM cue_vectors c INDEXED BY idx_cue_vectors_due JOIN "
        "fragments f ON f.id = c.fragment_id WHERE c.vectors IS NULL LIMIT 64").fetchall())[0]
    conn.close()
    out[f"{layout}: 20 blobs, first read (ms)"].append(first * 1000)
    out[f"{layout}: 20 blobs, median of 20 reads (ms)"].append(statistics.median(later) * 1000)
    out[f"{layout}: due read, none due (ms)"].append(none_due * 1000)
    out[f"{layout}: file (MB)"].append(path.stat().st_size / 1e6)


def one_run(work: Path, cued: dict[str, int], took: dict[str, list[float]],
            out: dict[str, list[float]], flip: bool) -> None:
    for name in (reversed(list(cued)) if flip else cued):
        path = copy(work / f"{name}.db", work / "run.db")
        seconds, opened = timed(Store, path)
        store: Store = opened  # type: ignore[assignment]
        assert store.user_version() == 12 and store.cue_vectors_due_count() == cued[name]
        took[f"10 -> 12, {name}"].append(seconds)
        if cued[name]:
            out["12: due read, all due (ms)"].append(timed(store.cue_vectors_due, 64)[0] * 1000)
            fill_as_12(store)
        store.close()
        if cued[name]:
            reads(path, out, "12")
    old = copy(work / "all cued.db", work / "run.db")
    fill_as_11(old)
    reads(old, out, "11")
    seconds, opened = timed(Store, old)
    store = opened  # type: ignore[assignment]
    assert store.cue_vectors_due_count() == 0 and store.user_version() == 12
    took["11 -> 12, all cued and filled"].append(seconds)
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    out["11 filled, then 12: file (MB)"].append(old.stat().st_size / 1e6)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cue-vectors-migration-"))
    try:
        cued = {name: template(args.source, work / f"{name}.db", with_cues)
                for name, with_cues in (("no cues", False), ("all cued", True))}
        took: dict[str, list[float]] = defaultdict(list)
        out: dict[str, list[float]] = defaultdict(list)
        for run in range(args.runs):
            one_run(work, cued, took, out, flip=run % 2 == 1)
        print(f"notes with cues: {cued}")
        print(table(f"migrations ({args.runs} runs, seconds)", ["migration", "runs", "median"],
                    [[k, ", ".join(f"{t:.2f}" for t in v), f"{statistics.median(v):.2f}"]
                     for k, v in took.items()]))
        print(table("the two layouts, every cued note filled (medians)", ["what", "median"],
                    [[k, f"{statistics.median(v):.3f}"] for k, v in sorted(out.items())]))
        write_json(args.json, "cue_vectors_migration", {"cued": cued, "migrations": took,
                                                        "layouts": out})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
