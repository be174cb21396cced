"""JSON files of results: NumPy values as plain JSON, NaN/inf as null. Bottom layer of
analysis/ (beside analysis.errors): every layer writes its results with it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def write_json(path: Path, obj: dict[str, Any]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_clean(obj), indent=2, allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")
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
