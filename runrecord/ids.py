"""Stable run ids (a short hash of everything that defines a run) and files' SHA-256."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def canonical_json(obj: Any, spaced: bool = False) -> str:
    """JSON with sorted keys, so equal definitions hash equally; no whitespace unless
    `spaced` (json's default ", " and ": ": the keys of a sweep's stored looks are hashes
    of that text, and a resumed sweep finds its looks, and the alpha they spent, by them)."""
    return json.dumps(obj, sort_keys=True, separators=(", ", ": ") if spaced else (",", ":"),
                      default=str)


def digest(obj: Any, length: int = 12, spaced: bool = False) -> str:
    """Hex digest of `obj`'s canonical JSON, `length` characters."""
    return hashlib.sha256(canonical_json(obj, spaced).encode()).hexdigest()[:length]


def run_id(definition: Mapping[str, Any], length: int = 12) -> str:
    """Hex digest of the run's definition (system, architecture, env, seed,
    hyperparameters, env protocol, layout). Same definition, same id; anything that
    changes the run changes the id.
    """
    return digest(dict(definition), length)


def file_digest(path: Path) -> tuple[str, int]:
    """(SHA-256 hex, size in bytes) of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size
