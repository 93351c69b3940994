"""One `lore hub push` timed, with the Lore of a given checkout (bench_hub_push.py --base runs
it with the old checkout's code and this one's, alternating). Standalone: it imports only
what both checkouts have (Settings, Store, hub_sync.push, init_hub).

    PYTHONPATH=CHECKOUT python bench/hub_push_worker.py SERVER_URL DATABASE SQLITE_FILE

Creates DATABASE on the server (a fresh hub: the table's size decides how a push loads),
pushes a copy of SQLITE_FILE into its space `personal`, pushes again, drops DATABASE, and
prints one JSON line: fragments, edges, seconds, rate, second push seconds and additions."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import psycopg

from lore_plugin.core.config import Settings
from lore_plugin.hub import init_hub
from lore_plugin.maintenance import hub_sync
from lore_plugin.store import Store


def main() -> None:
    server, database, source = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}"')
        admin.execute(f'CREATE DATABASE "{database}"')
    url = server.replace("/postgres?", f"/{database}?")
    work = Path(tempfile.mkdtemp(prefix="hub-push-"))
    try:
        init_hub(url)
        db = work / "memory.db"
        shutil.copy(source, db)  # push re-keys projects first: never on the source
        settings = replace(Settings(db_path=db, home=work), hub_url=url)
        local = Store(db)
        started = time.perf_counter()
        first = hub_sync.push(settings, local, "personal")
        took = time.perf_counter() - started
        started = time.perf_counter()
        second = hub_sync.push(settings, local, "personal")
        again = time.perf_counter() - started
        local.close()
        with psycopg.connect(url, autocommit=True) as conn:
            valid = conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = "
                                 "to_regclass('fragments_embedding')").fetchone()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    print(json.dumps({"fragments": first.fragments, "edges": first.edges, "seconds": took,
                      "rate": first.fragments / took, "second_seconds": again,
                      "second_added": second.fragments + second.edges,
                      "vector_index_valid": bool(valid and valid[0])}))


if __name__ == "__main__":
    main()
