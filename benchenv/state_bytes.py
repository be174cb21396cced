"""A small, safe byte format for env states: a JSON header and named numpy arrays.

Checkpoints hold env states (benchenv/ale_exact.py `get_state`); reading one must not run
code (no pickle), and the same state must give the same bytes (a checkpoint's SHA-256 is
then a function of the run). Layout: MAGIC, the header's length (8 bytes, little endian),
the UTF-8 JSON header {"meta": ..., "arrays": [[name, dtype, shape], ...]}, then each
array's C-order bytes in the header's order.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

MAGIC = b"benchenv-state-1\n"


def pack(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    """`meta` (JSON-able) and `arrays` as bytes (`unpack` reads them back)."""
    items = [(name, np.ascontiguousarray(a)) for name, a in arrays.items()]
    head = {"meta": meta, "arrays": [[name, a.dtype.str, list(a.shape)] for name, a in items]}
    text = json.dumps(head, sort_keys=True, separators=(",", ":")).encode()
    return b"".join([MAGIC, len(text).to_bytes(8, "little"), text,
                     *(a.tobytes() for _, a in items)])


def unpack(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, arrays) of `pack`'s bytes; ValueError when they are not such bytes."""
    if not data.startswith(MAGIC):
        raise ValueError("not an env state (wrong magic)")
    at = len(MAGIC)
    n = int.from_bytes(data[at:at + 8], "little")
    head = json.loads(data[at + 8:at + 8 + n])
    at += 8 + n
    arrays = {}
    for name, dtype, shape in head["arrays"]:
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise ValueError(f"array {name!r} of objects refused")
        size = dt.itemsize * int(np.prod(shape, dtype=np.int64))
        if at + size > len(data):
            raise ValueError(f"env state truncated in array {name!r}")
        arrays[name] = np.frombuffer(data, dt, int(np.prod(shape, dtype=np.int64)),
                                     at).reshape(shape).copy()
        at += size
    if at != len(data):
        raise ValueError(f"env state has {len(data) - at} bytes after its arrays")
    return head["meta"], arrays
