"""`lore hub` from the command line, as a user runs it (subprocesses, a real PostgreSQL with
pgvector, and Debian's PostgreSQL 15 without it): init is idempotent, push previews then
copies keeping ids and adds nothing the second time, pull brings a space home, and each kind
of bad input is one line and a non-zero exit with the local file untouched."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import psycopg
import pytest

from lore_plugin.hub import HubStore
from lore_plugin.hub.schema import SCHEMA_VERSION
from tests.conftest import PYTHON, python_env
from tests.hub.conftest import PASSWORD, plain_postgres  # noqa: F401 - a fixture

FACTS = ["The gateway deploys with helm on Tuesdays", "Invoices live in PostgreSQL 16",
         "The dashboard uses Tailwind only"]


def lore(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = python_env(LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"), **env)
    for name in ("LORE_CONFIG", "LORE_HUB_URL", "LORE_HUB_SPACE"):
        if name not in env:
            environ.pop(name, None)
    return subprocess.run([PYTHON, "-W", "ignore", "-m", "lore_plugin.cli", *args], env=environ,
                          capture_output=True, text=True, timeout=180)


def fresh_database(hub_url: str) -> str:
    """A new empty database on the session's hub server, as a URL."""
    name = f"d{os.urandom(5).hex()}"
    with psycopg.connect(hub_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return hub_url.replace("/postgres?", f"/{name}?")


def one_line_refusal(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lore: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


@pytest.fixture()
def home_with_facts(tmp_path: Path) -> Path:
    home = tmp_path / "laptop"
    for fact in FACTS:
        done = lore(home, "remember", "--topic", "Platform", fact)
        assert done.returncode == 0, done.stderr
    return home


def test_init_creates_the_schema_and_spaces_and_a_second_run_changes_nothing(
        tmp_path: Path, hub_url: str) -> None:
    url = fresh_database(hub_url)

    first = lore(tmp_path, "hub", "init", url, "--space", "team")
    second = lore(tmp_path, "hub", "init", url, "--space", "team")

    assert first.returncode == 0, first.stderr
    assert f"migrated the schema ({SCHEMA_VERSION} migration" in first.stdout
    assert "space personal: 0 fragments" in first.stdout and "space team" in first.stdout
    assert second.returncode == 0 and "already current (0 migrations run)" in second.stdout
    assert 'url = "' in first.stdout  # how to keep using it


def test_push_previews_then_copies_keeping_ids_and_a_second_push_adds_nothing(
        home_with_facts: Path, hub_url: str) -> None:
    url = fresh_database(hub_url)
    assert lore(home_with_facts, "hub", "init", url).returncode == 0
    hub = {"LORE_HUB_URL": url}

    preview = lore(home_with_facts, "hub", "push", "--space", "personal", **hub)
    assert preview.returncode == 0 and "4 of the local fragments are not in it yet" in preview.stdout
    assert HubStore(url, "personal").count_fragments() == 0  # a preview copies nothing

    pushed = lore(home_with_facts, "hub", "push", "--space", "personal", "--yes", **hub)
    again = lore(home_with_facts, "hub", "push", "--space", "personal", "--yes", **hub)

    assert "push: 4 fragments and 3 edges added" in pushed.stdout, pushed.stderr
    assert "push: 0 fragments and 0 edges added" in again.stdout
    from lore_plugin.store import Store

    local = Store(home_with_facts / "memory.db")
    space = HubStore(url, "personal")
    assert sorted(r["id"] for r in local.export_fragments()) == sorted(
        r["id"] for r in space.export_fragments())
    space.close()
    local.close()


def test_pull_brings_a_space_into_another_machines_local_file(
        tmp_path: Path, home_with_facts: Path, hub_url: str) -> None:
    url = fresh_database(hub_url)
    assert lore(home_with_facts, "hub", "init", url).returncode == 0
    assert lore(home_with_facts, "hub", "push", "--space", "personal", "--yes",
                LORE_HUB_URL=url).returncode == 0
    desktop = tmp_path / "desktop"

    pulled = lore(desktop, "hub", "pull", "--space", "personal", "--yes", LORE_HUB_URL=url)
    offline = lore(desktop, "recall", "how does the gateway deploy")

    assert "pull: 4 fragments and 3 edges added" in pulled.stdout, pulled.stderr
    assert "helm on Tuesdays" in offline.stdout


def test_bad_input_is_one_line_and_a_non_zero_exit_with_the_local_file_untouched(
        home_with_facts: Path, hub_url: str, plain_postgres: str) -> None:  # noqa: F811
    db = home_with_facts / "memory.db"
    before = digest(db)
    url = fresh_database(hub_url)
    assert lore(home_with_facts, "hub", "init", url).returncode == 0
    newer = fresh_database(hub_url)
    assert lore(home_with_facts, "hub", "init", newer).returncode == 0
    with psycopg.connect(newer, autocommit=True) as conn:
        conn.execute("INSERT INTO lore_schema VALUES (%s, 0)", (SCHEMA_VERSION + 1,))
    dead = f"postgresql://postgres@/postgres?host={home_with_facts}/no-server"

    cases = {
        "cannot connect to the hub": ("hub", "push", "--space", "personal", "--yes",
                                      {"LORE_HUB_URL": dead}),
        "holds a password": ("hub", "init", "postgresql://lore:hunter2@127.0.0.1/x", {}),
        "has no space 'nosuch'": ("hub", "push", "--space", "nosuch", "--yes",
                                  {"LORE_HUB_URL": url}),
        "newer than this Lore": ("hub", "pull", "--space", "personal", "--yes",
                                 {"LORE_HUB_URL": newer}),
        "password authentication failed": ("hub", "init", {
            "LORE_HUB_URL": plain_postgres, "LORE_CONFIG": str(config(home_with_facts)),
            "LORE_TEST_HUB_PW": "wrong-password"}),
        "install pgvector": ("hub", "init", {
            "LORE_HUB_URL": plain_postgres, "LORE_CONFIG": str(config(home_with_facts)),
            "LORE_TEST_HUB_PW": PASSWORD}),
        "no hub is configured": ("hub", "push", "--space", "personal", {}),
    }
    for expected, (*args, env) in cases.items():
        line = one_line_refusal(lore(home_with_facts, *args, **env))
        assert expected in line, line
        assert "hunter2" not in line and PASSWORD not in line and "wrong-password" not in line
    assert digest(db) == before


def config(home: Path) -> Path:
    path = home / "hub-config.toml"
    path.write_text('[hub]\npassword_env = "LORE_TEST_HUB_PW"\n')
    return path
