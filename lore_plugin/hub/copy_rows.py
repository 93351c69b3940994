"""Rows into a (staging) table by one binary COPY: the fast way in for a bulk push.

Binary, because a vector in pgvector's text form costs Python about 1 ms to write (384 float
reprs) and the server as much to parse; in binary it is the stored float32s byte-swapped
(about 0.01 ms). A vector is given as Lore stores it (little-endian float32 bytes, as
SQLite keeps it) and its size is checked before anything is sent."""

from __future__ import annotations

import struct
from array import array
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

from ..core.types import EMBED_BYTES, EMBED_DIM
from .errors import ModelMismatch

_HEADER = struct.pack(">HH", EMBED_DIM, 0)  # pgvector's binary form: dimensions, unused


def vector_binary(blob: bytes) -> bytes:
    """Little-endian float32 bytes as pgvector's binary input (big-endian floats)."""
    values = array("f")  # 4-byte items: byteswap reverses each, whatever the host's order
    values.frombytes(blob)
    values.byteswap()
    return _HEADER + values.tobytes()


def check_vector(blob: bytes | None) -> None:
    if blob is not None and len(blob) != EMBED_BYTES:
        raise ModelMismatch(f"a vector of {len(blob) // 4} dimensions cannot go into a hub "
                            f"space of {EMBED_DIM}-dimension vectors")


def copy_binary(cur: psycopg.Cursor[Any], table: str, columns: Sequence[str],
                types: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """COPY `rows` into `table`; `types` name each column's type ('vector' for vectors)."""
    oids: list[int] = []
    for name in types:
        if name == "vector":
            oid = cur.execute("SELECT 'vector'::regtype::oid").fetchone()[0]  # type: ignore[index]
            dumper = type("VectorDumper", (Dumper,),
                          {"format": Format.BINARY, "oid": oid,
                           "dump": lambda self, obj: vector_binary(obj)})
            cur.adapters.register_dumper(None, dumper)
            oids.append(oid)
        else:
            oids.append(cur.adapters.types.get_oid(name))
    with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(oids)
        for row in rows:
            copy.write_row(row)
