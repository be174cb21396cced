"""Run records: the one format that trainers, baselines, harness and analysis share.

See docs/run-format.md. Import from here:

    from runrecord import RunWriter, load_run, find_run_dirs, parse_layout, run_id
"""

from runrecord import schema
from runrecord.ids import canonical_json, run_id
from runrecord.layout import Layout, LayoutError, parse_layout
from runrecord.paths import portable_path, resolve_path
from runrecord.reader import Run, Table, find_run_dirs, load_run, read_manifest, read_table
from runrecord.writer import (
    RecordError,
    RunWriter,
    atomic_write_json,
    error_info,
    utc_now,
    write_skipped,
)

__all__ = [
    "schema", "canonical_json", "run_id", "Layout", "LayoutError", "parse_layout", "Run",
    "Table", "find_run_dirs", "load_run", "read_manifest", "read_table", "RecordError",
    "RunWriter", "atomic_write_json", "error_info", "utc_now", "write_skipped",
    "portable_path", "resolve_path",
]
