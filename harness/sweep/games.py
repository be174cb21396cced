"""Fast game-id checks for `plan`: EnvPool's env list, cached per EnvPool version (the
ALE backend's list comes from ale-py's ROM list, which needs no cache).

Importing envpool takes seconds; the list of its env ids only changes with its version,
so a cached copy answers `is this id valid` without the import. Unknown ids still go
through benchenv.check_env_id, whose error names close matches.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
from pathlib import Path


def _cache_path() -> Path | None:
    try:
        version = importlib.metadata.version("envpool")
    except importlib.metadata.PackageNotFoundError:
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "cleanba-bench" / f"envpool-{version}-env-ids.json"


@functools.cache
def known_env_ids() -> frozenset[str]:
    path = _cache_path()
    if path is not None:
        try:
            return frozenset(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
    import envpool

    ids = sorted(envpool.list_all_envs())
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(ids))
            tmp.replace(path)
        except OSError:
            pass  # a read-only home: no cache, just slower
    return frozenset(ids)


def check_game(env_id: str, backend: str | None = None) -> None:
    """Raise benchenv.EnvError (with suggestions) when `backend` (default: the trainers'
    default, benchenv.default_backend) has no such env or is not installed."""
    from benchenv import check_env_id, default_backend

    backend = backend or default_backend()
    if backend == "envpool" and _cache_path() is not None and env_id in known_env_ids():
        return
    check_env_id(env_id, backend)
