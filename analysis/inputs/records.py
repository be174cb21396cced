"""Run records (and runs already read from elsewhere) in one RunSet, filtered by manifest
values: what every subcommand of `python -m analysis` (and a notebook) starts from."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from analysis.errors import AnalysisError
from analysis.inputs.env_versions import apply_env_map, rule_lines
from analysis.inputs.keys import check_keys
from analysis.inputs.load import RunSet, load_runs, manifest_get
from runrecord import Run


def parse_key_values(pairs: Sequence[str], flag: str) -> list[tuple[str, str]]:
    """KEY=VALUE strings as (key, value), stripped; AnalysisError names a bad one."""
    out = []
    for cond in pairs:
        if "=" not in cond:
            raise AnalysisError(f"bad {flag} {cond!r}: expected KEY=VALUE")
        key, value = cond.split("=", 1)
        out.append((key.strip(), value.strip()))
    return out


def select_where(runs: Sequence[Run], where: Sequence[str]) -> list[Run]:
    """The runs whose manifest matches every KEY=VALUE of `where` (dotted keys)."""
    out = list(runs)
    for key, value in parse_key_values(where, "--where"):
        out = [r for r in out if str(manifest_get(r.manifest, key)) == value]
    return out


def load_records(inputs: Sequence[Path | str] = (), *,
                 more: Sequence[Callable[[], RunSet]] = (), where: Sequence[str] = (),
                 use_cache: bool = True, env_map: Mapping[str, str] | None = None) -> RunSet:
    """Every run record under `inputs`, then the runs each of `more` reads (e.g.
    openrlbenchmark exports), keeping only completed runs that match `where` (KEY=VALUE,
    dotted manifest keys). `use_cache=False` parses every record instead of reading the
    record cache (analysis.inputs.cache). `env_map`: env ids scored as another
    (analysis.inputs.env_versions); the warnings say which env-version rule was applied."""
    if not inputs and not more:
        raise AnalysisError("give at least one run/sweep folder (or --orb DIR)")
    rs = load_runs(inputs, use_cache=use_cache) if inputs else RunSet()
    for read in more:
        rs.extend(read())
    rs.warnings += check_keys(rs.included, [k for k, _ in parse_key_values(where, "--where")],
                              "--where")
    rs.included = apply_env_map(select_where(rs.included, where), env_map or {})
    rs.warnings += rule_lines(rs.included, env_map or {})
    return rs
