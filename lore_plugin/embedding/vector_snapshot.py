"""A file copy of a large vector index, next to the database, so that a new server has 100K
vectors in memory in tens of milliseconds instead of reading them out of SQLite (0.6–0.9 s,
which is most of the wait for its first answer).

It is only a cache. It names the database's vector epoch and the last rowid it covers, and the
index checks it against the database before trusting it (see VectorIndex.refresh); anything
wrong with the file (missing, truncated, another format, another database) means it is
ignored and rebuilt. Writers go through a temporary file and an atomic rename, so concurrent
servers and a crash mid-write never leave a half file under the real name. The arrays are
plain .npy records, mapped rather than read (see `load`); records of Python objects are
refused, so no code runs from the file."""

from __future__ import annotations

import json
import logging
import math
import mmap
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ..core.locks import abandoned_temp, temp_sibling

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)
FORMAT = 2
STALE_TEMP_AGE = 3600.0  # a temporary file this old was left by a killed writer
FINITE_CHUNK = 4096  # rows checked at a time (_all_finite)


@dataclass
class Snapshot:
    epoch: str
    max_rowid: int
    ids: np.ndarray  # bytes
    rowids: np.ndarray
    depths: np.ndarray
    matrix: np.ndarray  # int8 full vectors
    scales: np.ndarray  # float32, one per row: vector = matrix[i] * scales[i]
    basis: np.ndarray
    reduced: np.ndarray


def snapshot_path(db_path: Path) -> Path | None:
    """Where the snapshot of this database lives; None for an in-memory database."""
    if str(db_path) in ("", ":memory:"):
        return None
    return db_path.with_name(f"{db_path.name}-vectors")


def save(path: Path, snap: Snapshot, current: Callable[[], bool],
         tails: dict[str, np.ndarray] | None = None) -> bool:
    """Writes `snap` unless `current()` says the database's vectors moved on meanwhile.
    Checked again after the rename: `forget` deletes the file after its commit, so a writer
    that renamed a copy made before that commit removes it itself. Returns whether it stays.
    `tails` holds rows that follow `snap`'s "matrix" or "reduced" (the index's appended
    block, vector_math.Rows): written into the same record, so no joined copy is made."""
    import numpy as np

    tails = tails or {}

    header = json.dumps({"format": FORMAT, "epoch": snap.epoch, "max_rowid": snap.max_rowid,
                         "rows": len(snap.ids)}).encode()
    temp = temp_sibling(path)
    _remove_stale_temps(path)
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # as private as the db
        with os.fdopen(fd, "wb") as out:
            for name, array in (("header", np.frombuffer(header, dtype=np.uint8)),
                                ("ids", snap.ids), ("rowids", snap.rowids),
                                ("depths", snap.depths), ("matrix", snap.matrix),
                                ("scales", snap.scales), ("basis", snap.basis),
                                ("reduced", snap.reduced)):
                _write_array(out, array, tails.get(name))
        if not current():
            return False
        os.replace(temp, path)
        if not current():
            path.unlink(missing_ok=True)
            return False
        return True
    finally:
        temp.unlink(missing_ok=True)


def _write_array(out: BinaryIO, array: np.ndarray, tail: np.ndarray | None) -> None:
    """One .npy record of `array`'s rows followed by `tail`'s, as np.save would write their
    concatenation."""
    import numpy as np

    if tail is None or not len(tail):
        np.save(out, array, allow_pickle=False)
        return
    if tail.dtype != array.dtype or tail.shape[1:] != array.shape[1:]:
        raise ValueError("a tail of another type or width than its array")
    np.lib.format.write_array_header_2_0(out, {
        "descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False,
        "shape": (len(array) + len(tail),) + array.shape[1:]})
    for part in (array, tail):
        out.write(np.ascontiguousarray(part).data)


def load(path: Path, epoch: str | None = None) -> Snapshot | None:
    """The snapshot at `path`, or None when there is none, it cannot be read whole, or it is
    of another vector epoch than `epoch` (told from its header, without reading the rest).

    The arrays are views of the file mapped into memory (copy-on-write), not copies. A query
    touches only the pages it reads: every page of the reduced vectors, but only the
    candidates' rows of the full ones (38 MB at 100K). The pages belong to the page cache,
    so the servers of several sessions share one copy. Writers never change a snapshot in
    place (they rename a new file over it), so a mapping always sees whole, unchanging data."""
    try:
        with open(path, "rb") as src:
            # Copy-on-write: a row put in place (VectorIndex.replace) copies only its page;
            # the file and every other page stay shared.
            mapped = mmap.mmap(src.fileno(), 0, access=mmap.ACCESS_COPY)
            header = json.loads(_next_array(src, mapped)[0].tobytes())
            if header.get("format") != FORMAT or (epoch is not None
                                                  and str(header.get("epoch")) != epoch):
                return None
            records = [_next_array(src, mapped) for _ in range(7)]
            ids, rowids, depths, matrix, scales, basis, reduced = (a for a, _ in records)
            snap = Snapshot(str(header["epoch"]), int(header["max_rowid"]), ids, rowids,
                            depths, matrix, scales, basis, reduced)
            offsets = {id(a): offset for a, offset in records}
            problem = _problem(snap, int(header.get("rows", -1)),
                               lambda a: _file_rows(src.fileno(), a, offsets[id(a)]))
    except FileNotFoundError:
        return None
    except Exception as exc:  # a damaged cache is rebuilt, never fatal
        log.warning("ignoring the vector snapshot %s: %s", path, exc)
        return None
    if problem:
        log.warning("ignoring the vector snapshot %s: %s", path, problem)
        return None
    return snap


def _problem(snap: Snapshot, rows: int,
             rows_of: Callable[[np.ndarray], Callable[[int, int], np.ndarray]]) -> str | None:
    """What makes the arrays unusable, or None. Every array is checked whole, not sampled:
    the index's own check compares a few dozen rows with the database, and a matrix one
    column wide passed it and then broke every search. The float arrays are read from the
    file (`rows_of`, see _file_rows), not through the mapping: load() at 100K rows took 9-16
    ms (medians, warm page cache) against 0.2-0.3 ms with shape checks only. The full int8
    matrix needs no scan, as every int8 is finite."""
    import numpy as np

    from ..core.types import EMBED_DIM

    wanted = {"ids": (snap.ids, "S", 1), "rowids": (snap.rowids, np.int64, 1),
              "depths": (snap.depths, np.int16, 1), "matrix": (snap.matrix, np.int8, 2),
              "scales": (snap.scales, np.float32, 1), "basis": (snap.basis, np.float32, 2),
              "reduced": (snap.reduced, np.float32, 2)}
    for name, (array, dtype, ndim) in wanted.items():
        right_type = array.dtype.kind == "S" if dtype == "S" else array.dtype == dtype
        if not right_type or array.ndim != ndim:
            return f"{name} is {array.dtype} with {array.ndim} dimension(s)"
        if len(array) != rows and name != "basis":
            return f"{name} has {len(array)} rows, the header says {rows}"
    width = snap.basis.shape[1]
    if snap.matrix.shape[1] != EMBED_DIM or snap.basis.shape[0] != EMBED_DIM:
        return f"vectors are {snap.matrix.shape[1]} wide, not {EMBED_DIM}"
    if not 0 < width <= EMBED_DIM or snap.reduced.shape[1] != width:
        return "the reduced vectors and their basis disagree in width"
    for name in ("scales", "basis", "reduced"):
        array = getattr(snap, name)
        if not _all_finite(len(array), rows_of(array)):
            return f"{name} holds values that are not finite"
    if rows and not (snap.scales > 0).all():
        return "a scale is not positive"
    if rows and (int(snap.rowids[0]) < 1 or int(snap.rowids[-1]) > snap.max_rowid
                 or not (np.diff(snap.rowids) > 0).all()):
        return "rowids are not increasing within the range the header names"
    return None


def _all_finite(length: int, rows: Callable[[int, int], np.ndarray]) -> bool:
    """Whether `rows(start, stop)` are finite for every row, FINITE_CHUNK rows at a time."""
    import numpy as np

    return all(bool(np.isfinite(rows(start, min(start + FINITE_CHUNK, length))).all())
               for start in range(0, length, FINITE_CHUNK))


def _file_rows(fd: int, array: np.ndarray, offset: int) -> Callable[[int, int], np.ndarray]:
    """Rows of a mapped array read from its file (at `offset`), not through the mapping.
    Checking through the mapping made all of it resident at once (the reduced copy, 49 MB
    at 100K rows): when a service has loaded its index from SQLite and swaps it for the
    snapshot it just wrote, that came on top of the arrays read from SQLite, and set the
    service's peak (bench/bench_service_memory.py). Queries then bring in what they read.
    The check reads a chunk at a time (one mask of the whole reduced copy is 12.8 MB)."""
    import numpy as np

    width = math.prod(array.shape[1:])

    def rows(start: int, stop: int) -> np.ndarray:
        size = (stop - start) * width * array.itemsize
        data = os.pread(fd, size, offset + start * width * array.itemsize)
        if len(data) != size:
            raise ValueError("the file ends inside an array")
        return np.frombuffer(data, dtype=array.dtype)

    return rows


def _next_array(src: BinaryIO, mapped: mmap.mmap) -> tuple[np.ndarray, int]:
    """The .npy record at `src`'s position, as a view of `mapped`, and where its data starts
    in the file; `src` moves past it."""
    import numpy as np

    version = np.lib.format.read_magic(src)
    if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(src)
    elif version == (2, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(src)
    else:
        raise ValueError(f".npy version {version} is not one this code writes")
    if fortran_order or dtype.hasobject:
        raise ValueError("an array in Fortran order or of Python objects")
    count = math.prod(shape)
    offset = src.tell()
    array = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset).reshape(shape)
    src.seek(count * dtype.itemsize, os.SEEK_CUR)
    return array, offset


def remove(db_path: Path) -> None:
    """Deletes the snapshot, e.g. after `forget`: it still holds the forgotten vectors."""
    path = snapshot_path(db_path)
    if path is not None:
        path.unlink(missing_ok=True)
        _remove_stale_temps(path, max_age=0.0)  # a live writer's temp holds the same vectors


def _remove_stale_temps(path: Path, max_age: float = STALE_TEMP_AGE) -> None:
    """Removes temporary files whose writer is gone (a server that exited mid-write) or that
    are older than `max_age` (in case the writer's pid was reused)."""
    now = time.time()
    for temp in path.parent.glob(f"{path.name}.tmp-*"):
        try:
            if temp != temp_sibling(path) and (abandoned_temp(temp)
                                               or now - temp.stat().st_mtime >= max_age):
                temp.unlink()
        except OSError:
            pass  # already gone
