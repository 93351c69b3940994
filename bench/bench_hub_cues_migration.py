"""Hub migration 7 (issue 30, cues) on a filled hub: how long `lore hub init` takes, beside
the table rewrite it avoids.

    python bench/bench_hub_cues_migration.py --base /tmp/base --source bench/.cache/bench-100000-v1.db \
        [--rows 10000] [--runs 3] [--json PATH]

A local file of the source's first ROWS fragments (and the edges between them) is pushed,
with the old checkout's code (--base, schema 6), into one database of a throwaway server
(`lore hub dev`'s PostgreSQL 18 + pgvector). Each run clones that database twice
(CREATE DATABASE .. TEMPLATE) and, alternating which goes first, times on one clone this
checkout's `init_hub` (migration 7: a column added, the words' triggers replaced, fragments.tsv
dropped, every fragment's words checked), and on the other the form that keeps the
generated column (the cues column added and tsv's expression changed to include it:
ALTER COLUMN .. SET EXPRESSION, PostgreSQL 17+, which rewrites the table and rebuilds its
indexes). Each migrated clone is checked: every fragment keeps its words and the lexeme
counts agree. Medians are printed."""

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
from typing import Any

import psycopg
from psycopg import conninfo

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / "bench" / ".cache"
# The brief's first idea: keep fragments.tsv, give it the cues (a table rewrite).
REWRITE = """
ALTER TABLE fragments ADD COLUMN cues text NOT NULL DEFAULT '';
ALTER TABLE fragments ALTER COLUMN tsv SET EXPRESSION AS (
    setweight(to_tsvector('english'::regconfig, summary), 'A') ||
    setweight(to_tsvector('english'::regconfig, content), 'B') ||
    setweight(to_tsvector('english'::regconfig, cues), 'B'));
"""


def _url(server: str, database: str) -> str:
    return conninfo.make_conninfo(server, dbname=database)


def fill(server: str, database: str, source: Path) -> None:
    """Run with the old checkout's code: a hub at its schema, the file pushed into it."""
    from dataclasses import replace

    from lore_plugin.core.config import Settings
    from lore_plugin.hub import init_hub
    from lore_plugin.maintenance import hub_sync
    from lore_plugin.store import Store

    url = _url(server, database)
    init_hub(url)
    work = Path(tempfile.mkdtemp(prefix="hub-cues-fill-"))
    try:
        db = work / "memory.db"
        shutil.copy(source, db)
        local = Store(db)
        hub_sync.push(replace(Settings(db_path=db, home=work), hub_url=url), local, "personal")
        local.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def first_rows(source: Path, rows: int, target: Path) -> None:
    """A Lore file holding the source's first `rows` fragments and the edges among them."""
    from lore_plugin.store import Store

    src = Store(source, readonly=True)
    fragments = []
    for row in src.export_fragments():
        fragments.append(row)
        if len(fragments) == rows:
            break
    ids = {f["id"] for f in fragments}
    edges = [e for e in src.export_edges() if e["source"] in ids and e["target"] in ids]
    src.close()
    out = Store(target)
    out.import_rows(fragments, edges, [])
    out.close()


def _check(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        fragments = conn.execute("SELECT count(*) FROM fragments").fetchone()[0]  # type: ignore[index]
        words = conn.execute("SELECT count(*) FROM fragment_words").fetchone()[0]  # type: ignore[index]
        stale = conn.execute(
            "SELECT count(*) FROM fragment_words w JOIN fragments f USING (space, id) WHERE "
            "w.tsv IS DISTINCT FROM setweight(to_tsvector('english', f.summary), 'A') || "
            "setweight(to_tsvector('english', f.content), 'B')").fetchone()[0]  # type: ignore[index]
        off = conn.execute(
            "SELECT count(*) FROM (SELECT space, lexeme, sum(change) AS n FROM lexeme_counts "
            "GROUP BY 1, 2 HAVING sum(change) <> 0) k FULL JOIN (SELECT space, x AS lexeme, "
            "count(*) AS n FROM fragment_words, unnest(tsvector_to_array(tsv)) AS x "
            "GROUP BY 1, 2) l USING (space, lexeme) WHERE k.n IS DISTINCT FROM l.n"
        ).fetchone()[0]  # type: ignore[index]
        size = conn.execute("SELECT pg_total_relation_size('fragments')").fetchone()[0]  # type: ignore[index]
    assert fragments == words and stale == 0 and off == 0, (fragments, words, stale, off)
    return {"fragments": fragments, "table_mb": round(size / 2**20, 1)}


def _clone(server: str, name: str) -> str:
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE filled")
    return _url(server, name)


def _drop(server: str, name: str) -> None:
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def migration_7(server: str, name: str) -> dict[str, Any]:
    from lore_plugin.hub import init_hub

    url = _clone(server, name)
    started = time.perf_counter()
    assert init_hub(url, ()) == 1
    seconds = time.perf_counter() - started
    out = {"seconds": seconds, **_check(url)}
    _drop(server, name)
    return out


def rewrite(server: str, name: str) -> dict[str, Any]:
    url = _clone(server, name)
    with psycopg.connect(url) as conn:
        started = time.perf_counter()
        conn.execute(REWRITE)
        conn.commit()
        seconds = time.perf_counter() - started
    out = {"seconds": seconds, **_check(url)}
    _drop(server, name)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, help="the old checkout (hub schema 6)")
    parser.add_argument("--source", type=Path, default=CACHE_DIR / "bench-100000-v1.db")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--fill", nargs=3, help=argparse.SUPPRESS)  # server database file
    args = parser.parse_args()
    if args.fill:
        fill(args.fill[0], args.fill[1], Path(args.fill[2]))
        return
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from common import bench_env, table, write_json

    from lore_plugin.hub import dev

    work = Path(tempfile.mkdtemp(prefix="hub-cues-"))
    server = dev.start(work / "hub")
    try:
        first_rows(args.source, args.rows, work / "source.db")
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE filled")
        started = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--fill", server.url, "filled",
                        str(work / "source.db")], env=bench_env(PYTHONPATH=str(args.base)),
                       check=True, timeout=3600)
        print(f"  filled at schema 6 in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        took: dict[str, list[dict[str, Any]]] = {"migration 7": [], "tsv rewrite": []}
        for i in range(args.runs):
            order = [("migration 7", migration_7), ("tsv rewrite", rewrite)]
            for label, run in order if i % 2 == 0 else order[::-1]:
                took[label].append(run(server.url, f"c{os.urandom(4).hex()}"))
                print(f"  run {i + 1} {label}: {took[label][-1]}", file=sys.stderr)
    finally:
        dev.stop(work / "hub")
        shutil.rmtree(work, ignore_errors=True)
    med = {label: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for label, rs in took.items()}
    print(table(f"hub migration for cues on {args.rows:,} fragments ({args.runs} runs, medians)",
                ["form", "fragments", "seconds", "fragments table MB after"],
                [[label, f"{m['fragments']:,.0f}", f"{m['seconds']:.2f}", f"{m['table_mb']}"]
                 for label, m in med.items()]))
    write_json(args.json, "hub_cues_migration", {"rows": args.rows, "runs": took,
                                                 "median": med})
    print(json.dumps(med))


if __name__ == "__main__":
    main()
