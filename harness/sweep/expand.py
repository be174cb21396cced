"""Matrix expansion: validated matrices -> runs with stable ids (pure, cannot fail).

Everything that can be wrong with a matrix is found by harness.sweep.checks before it
becomes a ValidatedMatrix; here each one is only multiplied out.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import replace

from harness.sweep.model import RunSpec, ValidatedMatrix
from runrecord import run_id


def expand(matrix: ValidatedMatrix) -> list[RunSpec]:
    """The runs of one matrix: systems x architectures x layouts x env backends x games x
    seeds x grid, in that order (the last varies fastest); grid keys vary in sorted order."""
    grid_keys = sorted(matrix.grid)
    combos = list(itertools.product(*(matrix.grid[k] for k in grid_keys)))
    runs: list[RunSpec] = []
    for entry in matrix.systems:
        system = entry.system
        for arch, layout, backend, game, (rank, seed), combo in itertools.product(
            entry.architectures, matrix.layouts, matrix.env_backends, matrix.games,
            enumerate(matrix.seeds), combos,
        ):
            spec = RunSpec(
                sweep=matrix.sweep, system=system.name, architecture=arch, env_id=game.env_id,
                seed=seed, layout=layout, preset=game.preset if system.takes_preset else None,
                frames=matrix.frames, total_timesteps=game.total_timesteps,
                overrides={**matrix.overrides, **dict(zip(grid_keys, combo, strict=True))},
                resources=matrix.resources, entry=system.entry,
                takes_preset=system.takes_preset, baseline=system.baseline,
                matrix=matrix.label, key_lines=dict(matrix.key_lines),
                key_source=matrix.key_source, seed_rank=rank, env_backend=backend,
            )
            runs.append(replace(spec, run_id=run_id(spec.definition())))
    return runs


def expand_all(matrices: Iterable[ValidatedMatrix]) -> tuple[list[RunSpec], list[str]]:
    """The runs of all matrices, each run once (a run that another matrix already made is
    left out), and a note for each one left out."""
    runs: list[RunSpec] = []
    notes: list[str] = []
    seen: set[str] = set()
    for matrix in matrices:
        for run in expand(matrix):
            if run.run_id in seen:
                notes.append(f"{run.label()} appears in more than one matrix; run once")
                continue
            seen.add(run.run_id)
            runs.append(run)
    return runs, notes


def with_accelerator(runs: Sequence[RunSpec], accelerator: str) -> list[RunSpec]:
    """The runs with every run's accelerator replaced ('cpu' or 'gpu')."""
    return [replace(r, resources=replace(r.resources, accelerator=accelerator)) for r in runs]


def with_shared_cpu_devices(runs: Sequence[RunSpec]) -> list[RunSpec]:
    """The runs with every CPU run given the largest CPU layout's device count (why:
    RunSpec.cpu_devices)."""
    cpu_runs = [r for r in runs if r.resources.accelerator == "cpu"]
    if not cpu_runs:
        return list(runs)
    count = max(r.layout.devices_per_process for r in cpu_runs)
    return [replace(r, cpu_devices=count) if r.resources.accelerator == "cpu" else r
            for r in runs]
