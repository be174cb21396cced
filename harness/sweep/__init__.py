"""The sweep file: reading it, checking it, and the values it becomes.

The wing's modules, lowest first (each imports only those before it):

- `keys`: every key a sweep file may hold, with its one-line description;
- `tomlpos`: the line of each key (tomllib gives none);
- `systems`: the systems a sweep can run and their flags;
- `model`: the values (Sweep, RunSpec, AdaptiveConfig, ValidatedMatrix, ...);
- `checker`: one file's checker (errors with lines, typed getters, common sections);
- `checks`: the checks that make the values from a parsed file;
- `expand`: validated matrices -> runs; `read`: the file -> a Sweep, and the presets.

The rest of the harness imports from here: `from harness.sweep import load_sweep, RunSpec`.
"""

from harness.sweep.model import (
    AdaptiveConfig,
    Resources,
    RunSpec,
    ScaleDown,
    Sweep,
    SweepError,
    report_options,
)
from harness.sweep.read import (
    PRESET_DIR,
    filter_flags,
    list_presets,
    load_sweep,
    parse_list,
    parse_seeds,
    parse_sweep,
    preset_path,
)
from runrecord.paths import PROJECT_ROOT

__all__ = [
    "PROJECT_ROOT", "PRESET_DIR", "AdaptiveConfig", "Resources", "RunSpec", "ScaleDown",
    "Sweep", "SweepError", "filter_flags", "list_presets", "load_sweep", "parse_list",
    "parse_seeds", "parse_sweep", "preset_path", "report_options",
]
