"""Run records: the one format that trainers, baselines, harness and analysis share.

See docs/run-format.md. Import from here:

    from runrecord import RunWriter, load_run, find_run_dirs, parse_layout, run_id

The names below load on first use (PEP 562), so a process that needs only a light part
(`runrecord.exits`, imported by the trainers' signal watcher before anything else) does
not pay for numpy and the reader.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runrecord import schema
    from runrecord.ids import canonical_json, run_id
    from runrecord.layout import Layout, LayoutError, parse_layout
    from runrecord.paths import (
        PROJECT_ROOT,
        portable_path,
        project_path,
        resolve_path,
        results_root_of,
        run_folder,
    )
    from runrecord.reader import Run, Table, find_run_dirs, load_run, read_manifest, read_table
    from runrecord.writer import (
        RecordError,
        RunWriter,
        atomic_write_json,
        error_entry,
        error_info,
        read_manifest_or_none,
        settle,
        utc_now,
        write_skipped,
    )

_HOME = {
    "schema": "runrecord.schema",
    **dict.fromkeys(("canonical_json", "run_id"), "runrecord.ids"),
    **dict.fromkeys(("Layout", "LayoutError", "parse_layout"), "runrecord.layout"),
    **dict.fromkeys(("PROJECT_ROOT", "portable_path", "project_path", "resolve_path",
                     "results_root_of", "run_folder"), "runrecord.paths"),
    **dict.fromkeys(("Run", "Table", "find_run_dirs", "load_run", "read_manifest",
                     "read_table"), "runrecord.reader"),
    **dict.fromkeys(("RecordError", "RunWriter", "atomic_write_json", "error_entry",
                     "error_info", "read_manifest_or_none", "settle", "utc_now",
                     "write_skipped"), "runrecord.writer"),
}
__all__ = [
    "schema", "canonical_json", "run_id", "Layout", "LayoutError", "parse_layout", "Run",
    "Table", "find_run_dirs", "load_run", "read_manifest", "read_table", "RecordError",
    "RunWriter", "atomic_write_json", "error_entry", "error_info", "read_manifest_or_none",
    "settle", "utc_now", "write_skipped", "PROJECT_ROOT", "portable_path", "project_path",
    "resolve_path", "results_root_of", "run_folder",
]
assert sorted(__all__) == sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'runrecord' has no attribute {name!r}")
    module = importlib.import_module(_HOME[name])
    value = module if _HOME[name] == f"runrecord.{name}" else getattr(module, name)
    globals()[name] = value
    return value
