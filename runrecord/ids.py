"""Stable run ids: a short hash of everything that defines a run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal definitions hash equally."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def run_id(definition: Mapping[str, Any], length: int = 12) -> str:
    """Hex digest of the run's definition (system, architecture, env, seed,
    hyperparameters, env protocol, layout). Same definition, same id; anything that
    changes the run changes the id.
    """
    return hashlib.sha256(canonical_json(dict(definition)).encode()).hexdigest()[:length]
