"""The local embedder: it runs the model folder with onnxruntime directly and must give the
vectors fastembed gives for the same folder, without importing fastembed."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from conftest import MODEL_CACHE, ROOT, python_env

from lore_plugin import embedding
from lore_plugin.embedding import (
    MODEL_NAME,
    LocalEmbedder,
    OnnxSentenceModel,
    find_model_dir,
    optimized_model,
)

TEXTS = [
    "hello",
    "",
    "   ",
    "ERR_7731 appears when the retry policy gives up",
    "naïve café, 東京 and Zürich: unicode in summaries",
    "The user prefers pytest fixtures over unittest classes. " * 3,
    "database connection pooling timeout " * 120,  # far beyond the 256-token limit
]


def test_vectors_match_fastembed_for_the_same_model_folder(embedder):
    from fastembed import TextEmbedding

    folder = find_model_dir(MODEL_CACHE)
    assert folder is not None
    reference = TextEmbedding(MODEL_NAME, specific_model_path=str(folder),
                              cache_dir=str(MODEL_CACHE / "fastembed"), threads=1)
    expected = np.asarray(list(reference.embed(TEXTS, batch_size=4)))  # mixed-length batches
    ours = embedder.embed(TEXTS)
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert float((ours * expected).sum(axis=1).min()) > 0.99999


def test_long_texts_are_cut_at_the_model_limit_of_256_tokens(embedder):
    base = "database connection pooling timeout " * 80  # ~320 tokens already
    a, b = embedder.embed([base, base + "an entirely different ending about gardening"])
    assert float(a @ b) > 0.99999


def test_meaning_decides_similarity(embedder):
    query, near, far = embedder.embed(["how do we deploy to production",
                                       "the release goes out to prod with the deploy script",
                                       "my cat likes sleeping in the sun"])
    assert float(query @ near) > float(query @ far) + 0.2


def test_a_missing_model_without_downloads_reports_why_and_never_raises_on_load(tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("LORE_NO_DOWNLOAD", "1")
    monkeypatch.setenv("LORE_EMBED_MODEL_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setattr("lore_plugin.embedding.assemble_from_packages", lambda target: None)
    missing = LocalEmbedder(tmp_path)
    assert missing.available is False
    assert "LORE_NO_DOWNLOAD" in (missing.failure or "")
    with pytest.raises(RuntimeError, match="embedding model unavailable"):
        missing.embed(["anything"])


def test_the_local_model_path_never_imports_fastembed(tmp_path):
    code = ("import sys; from pathlib import Path; from lore_plugin.embedding import LocalEmbedder;"
            f"e = LocalEmbedder(Path({str(MODEL_CACHE)!r})); assert e.available, e.failure;"
            "print(e.embed(['x']).shape, 'fastembed' in sys.modules, 'huggingface_hub' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(1,", "384)", "False", "False"]


def test_the_optimised_copy_is_made_once_and_gives_the_same_vectors(tmp_path):
    folder = find_model_dir(MODEL_CACHE)
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / "optimized" / f"half-written.tmp-{gone.pid}"
    stale.mkdir(parents=True)
    older = tmp_path / "optimized" / "ort1.0.0-123-456"  # for an onnxruntime since upgraded
    older.mkdir()
    # The same onnxruntime, but a source model since re-assembled (another mtime): 90 MB left.
    superseded = tmp_path / "optimized" / f"ort{ort.__version__}-123-456"
    superseded.mkdir()
    made = optimized_model(folder / "model.onnx", tmp_path)
    assert made.exists() and (made.parent / "model.onnx.data").exists()
    assert not stale.exists()  # its writer is dead
    assert not older.exists() and not superseded.exists()
    stamp = made.stat().st_mtime_ns
    assert optimized_model(folder / "model.onnx", tmp_path) == made
    assert made.stat().st_mtime_ns == stamp
    plain = OnnxSentenceModel(folder, threads=1)  # no cache: the model as shipped
    fast = OnnxSentenceModel(folder, threads=1, cache_dir=tmp_path)
    a, b = plain.embed(TEXTS, batch_size=4), fast.embed(TEXTS, batch_size=4)
    assert np.abs(a - b).max() < 1e-4


def test_an_unwritable_cache_falls_back_to_the_model_as_shipped(tmp_path, caplog):
    folder = find_model_dir(MODEL_CACHE)
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder should be")
    model = OnnxSentenceModel(folder, threads=1, cache_dir=blocked)
    assert model.embed(["still works"], batch_size=1).shape == (1, 384)
    assert "without its optimised copy" in caplog.text


def test_a_copy_removed_before_it_is_opened_falls_back_to_the_model_as_shipped(tmp_path, caplog,
                                                                              monkeypatch):
    folder = find_model_dir(MODEL_CACHE)
    monkeypatch.setattr(embedding, "optimized_model", lambda source, cache: tmp_path / "gone.onnx")
    model = OnnxSentenceModel(folder, threads=1, cache_dir=tmp_path)
    assert model.embed(["still works"], batch_size=1).shape == (1, 384)
    assert "without its optimised copy" in caplog.text


def test_lore_prepare_builds_the_model_and_its_optimised_copy(tmp_path):
    env = python_env(LORE_HOME=str(tmp_path), LORE_NO_DOWNLOAD="1")
    env.pop("LORE_EMBED_MODEL_DIR", None)  # assembled from the installed packages
    done = subprocess.run([sys.executable, "-m", "lore_plugin.cli", "prepare"], capture_output=True,
                          text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr
    assert "the embedding model is ready" in done.stdout
    assert (tmp_path / "models" / "all-MiniLM-L6-v2" / "model.onnx").exists()
    assert len(list((tmp_path / "models" / "optimized").glob("*/model.onnx.data"))) == 1


def test_a_passing_load_failure_is_retried_later_instead_of_disabling_vectors_for_good(
        monkeypatch):
    import lore_plugin.embedding as embedding

    embedder = LocalEmbedder(MODEL_CACHE)
    real_create, attempts = embedder._create, []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("No space left on device")
        return real_create()

    monkeypatch.setattr(embedder, "_create", flaky)
    assert embedder.available is False and "No space left" in embedder.failure
    assert embedder.available is False and len(attempts) == 1  # not hammered at once
    monkeypatch.setattr(embedding, "RETRY_AFTER", 0.0)
    embedder._retry_at = 0.0
    assert embedder.available is True and embedder.failure is None
    assert embedder.embed(["back"]).shape == (1, 384)
