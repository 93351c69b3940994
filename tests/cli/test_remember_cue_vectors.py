"""`lore remember --cue` stores in-process, so it fills the note's cue vectors itself after
its commit: the per-prompt judge has them without waiting for a memory service. A real
subprocess, a real SQLite file, the real model."""

from __future__ import annotations

import subprocess

from lore_plugin.embedding.cue_vectors import decode
from lore_plugin.store import Store
from tests.conftest import PYTHON, python_env


def test_lore_remember_with_cues_leaves_the_notes_cue_vectors_filled(tmp_path, isolated_home):
    env = python_env(HOME=str(tmp_path / "home"), LORE_SERVICE="off")
    done = subprocess.run([PYTHON, "-m", "lore_plugin.cli", "remember", "--topic", "Web app",
                           "--cue", "dashboard charting library choice", "--cue",
                           "which library draws the graphs",
                           "The dashboard draws its charts with Apache ECharts 5."],
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    store = Store(isolated_home / "memory.db", readonly=True)
    try:
        (fid,) = [r[0] for r in store.execute("SELECT id FROM fragments WHERE cues != ''")]
        blobs = store.cue_vectors([fid])
        assert store.cue_vectors_due(10) == []
    finally:
        store.close()
    assert decode(blobs[fid]).shape == (2, 384)
