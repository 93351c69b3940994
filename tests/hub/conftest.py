"""A second real server for the hub's refusals: Debian's PostgreSQL 15, which has no pgvector,
on 127.0.0.1 with password authentication (scram-sha-256)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

PG15 = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "right-horse-battery"
SECRET = "ghp_" + "A1b2C3d4E5" * 4  # a GitHub token's shape: what redaction must catch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def plain_postgres() -> str:
    """URL (without password) of a PostgreSQL 15 without pgvector, password required. In
    its own /tmp folder for the reason tests/conftest.py's hub_url gives."""
    assert (PG15 / "initdb").exists(), "Debian's postgresql-15 is needed for this test"
    folder = Path(tempfile.mkdtemp(prefix="lore-test-pg15-"))
    data, pwfile = folder / "data", folder / "pw"
    pwfile.write_text(PASSWORD)
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        shutil.chown(folder, "postgres")
        shutil.chown(pwfile, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_user, str(PG15 / "initdb"), "-D", str(data), "-U", "lore",
                    "--auth=scram-sha-256", f"--pwfile={pwfile}"], check=True,
                   capture_output=True, timeout=120)
    port = _free_port()
    subprocess.run([*as_user, str(PG15 / "pg_ctl"), "-D", str(data), "-w", "-l",
                    str(folder / "log"), "-o", f"-h 127.0.0.1 -p {port} -k {folder}", "start"],
                   check=True, capture_output=True, timeout=60)
    try:
        yield f"postgresql://lore@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, str(PG15 / "pg_ctl"), "-D", str(data), "-w", "-m", "fast",
                        "stop"], capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


CUES = "start backend on my machine\nlocal development server"


def local_atlas(path: Path):
    """A local memory holding topic "Atlas" and one fact with CUES: (store, topic, fact)."""
    from lore_plugin.core.types import NewFragment
    from lore_plugin.store import Store

    store = Store(path)
    topic = store.insert(NewFragment(content="Atlas", summary="Atlas", depth=0), 1.0)
    fact = store.insert(NewFragment(content="To run atlas use make dev", summary="Running atlas",
                                    depth=2, cues=CUES), 2.0, parent_id=topic)
    return store, topic, fact
