"""The service's warm-up in memory: the model's one-time optimisation (embedder.prepare)
runs alone, before the vector index loads. Beside the index's load it set the service's peak
RSS at 100K fragments (349 MB against 285 MB; bench/bench_service_memory.py)."""

from __future__ import annotations

from lore_plugin.embedding.embedder import LocalEmbedder
from lore_plugin.recall.memory import Memory
from lore_plugin.service.engine import Service
from tests.recall.test_recontext import seeded


def optimised_copies(cache) -> list:
    return list(cache.glob("optimized/*/model.onnx"))


def test_prepare_makes_the_optimised_copy_without_loading_the_model(tmp_path):
    cache = tmp_path / "models"
    fresh = LocalEmbedder(cache)
    fresh.prepare()
    made = optimised_copies(cache)
    assert len(made) == 1 and fresh._model is None  # made, not loaded
    stamp = made[0].stat().st_mtime_ns
    assert fresh.available and fresh.embed(["loads from the copy"]).shape == (1, 384)
    assert optimised_copies(cache) == made and made[0].stat().st_mtime_ns == stamp  # reused
    fresh.prepare()  # loaded: nothing more to do
    assert optimised_copies(cache) == made


def test_the_warm_up_loads_the_index_only_once_the_model_is_optimised(tmp_path, memory,
                                                                      monkeypatch):
    seeded(memory)
    cache = tmp_path / "fresh-models"  # a first start in this home: no optimised copy yet
    service = Service(Memory(memory.db_path, LocalEmbedder(cache), memory.clock, memory.project))
    index = service.memory.index
    loads_began_with_copy: list[bool] = []
    refresh = index.refresh

    def watched(store):
        loads_began_with_copy.append(bool(optimised_copies(cache)))
        return refresh(store)

    monkeypatch.setattr(index, "refresh", watched)
    try:
        service.warm_up()
        assert loads_began_with_copy and loads_began_with_copy[0] is True
        assert service.memory.embedder_ready()
        assert service.memory.search("billing", limit=3)  # warm: model and index both in
    finally:
        service.close()


PREPARE_RSS = """
import sys
from pathlib import Path
from lore_plugin.embedding.embedder import LocalEmbedder
import onnxruntime, tokenizers, numpy

def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024

before = anon()
LocalEmbedder(Path(sys.argv[1])).prepare()
print(anon() - before)
"""


def test_preparing_the_model_hands_its_memory_back(tmp_path):
    """The optimising session's buffers (208 MB at its peak) are returned once it is gone:
    with glibc's mmap threshold left to rise, the heap kept 100 MB of them for good."""
    import subprocess
    import sys

    from tests.conftest import ROOT, python_env

    done = subprocess.run([sys.executable, "-c", PREPARE_RSS, str(tmp_path / "models")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=python_env(LORE_NO_DOWNLOAD="1"))
    assert done.returncode == 0, done.stderr
    assert optimised_copies(tmp_path / "models")
    assert float(done.stdout.split()[-1]) < 30  # MB of the process's own memory kept
