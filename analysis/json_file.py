"""JSON files of results: NumPy values as plain JSON, NaN/inf as null. Bottom layer of
analysis/ (beside analysis.errors): every layer writes its results with it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from runrecord.writer import atomic_write_text


def write_json(path: Path, obj: dict[str, Any]) -> Path:
    """`obj` as plain JSON at `path`, replaced whole (a reader never sees part of it)."""
    path = Path(path)
    atomic_write_text(path, json.dumps(_clean(obj), indent=2, allow_nan=False) + "\n")
    return path


def _clean(o: Any) -> Any:
    """Plain JSON: NumPy values to Python, NaN/inf to null, tuples to lists."""
    if hasattr(o, "tolist"):
        o = o.tolist()
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, (str, int, float, bool)) or o is None:
        return o
    return str(o)
