"""`lore service start|status|stop`, and `lore recall` answered by the running service."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lore_plugin.embedding.embedder import assemble_from_packages
from tests.conftest import MODEL_CACHE, PYTHON, python_env
from tests.service_running import service_info, stop_service, wait_gone


@pytest.fixture
def lore(tmp_path: Path):  # noqa: ANN201
    model_dir = assemble_from_packages(MODEL_CACHE / "all-MiniLM-L6-v2")
    env = python_env(LORE_HOME=str(tmp_path / "home"), LORE_DB_PATH=str(tmp_path / "memory.db"),
                     LORE_EMBED_MODEL_DIR=str(model_dir), LORE_NO_DOWNLOAD="1",
                     LORE_SERVICE="on")
    env.pop("LORE_CONFIG", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([PYTHON, "-m", "lore_plugin.cli", *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    yield run
    stop_service(tmp_path / "home")


def test_the_service_is_started_asked_and_stopped_from_the_command_line(lore, tmp_path: Path):
    assert "not running" in lore("service", "status").stdout
    assert lore("remember", "Blue-green deploys switch the load balancer at 10:00 UTC",
                "--summary", "blue-green switch time").returncode == 0
    started = lore("service", "start")
    assert started.returncode == 0 and "running, pid" in started.stdout
    pid = service_info(tmp_path / "home")["pid"]
    recalled = lore("recall", "when do blue green deploys switch", "--depth", "0")
    assert recalled.returncode == 0 and "blue-green switch time" in recalled.stdout
    status = lore("service", "status").stdout
    assert f"pid {pid}" in status and "requests" in status  # the recall went to the service
    assert "store journal: no store waiting for placement" in status
    assert "2 requests" in status or "3 requests" in status
    assert "draining" in lore("service", "stop").stdout
    wait_gone(pid)
    assert "not running" in lore("service", "status").stdout


def test_with_the_service_off_recall_still_answers_in_process(lore, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    lore("remember", "The cache TTL is 300 seconds", "--summary", "cache TTL")
    off = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "recall", "cache ttl", "--depth", "0"],
                         env={**python_env(LORE_HOME=str(tmp_path / "home"),
                                           LORE_DB_PATH=str(tmp_path / "memory.db"),
                                           LORE_NO_DOWNLOAD="1", LORE_SERVICE="off")},
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert off.returncode == 0 and "cache TTL" in off.stdout
    assert service_info(tmp_path / "home") is None
