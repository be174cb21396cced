"""The main() of every baseline adapter: parse, find the checkout, open the record, run.

`python -m baselines.monobeast` and `python -m baselines.moolib` take the same steps in
the same order, with the exit codes of the trainer command-line contract (docs/harness.md):

1. parse and check the flags (common.parse_cli): bad ones exit EXIT_BAD_INPUT, nothing written;
2. Baseline.plan: what can be worked out before the checkout (a bad setting: EXIT_BAD_INPUT);
3. find and import the checkout: missing, the run is recorded as skipped, EXIT_UNAVAILABLE;
4. open the record (a bad run folder: EXIT_BAD_INPUT); Baseline.start hooks the
   baseline's code and returns the run, or an exit code when it refuses to start;
5. train; whatever happens, the record is finished (status, error, summary, the
   manifest's baseline_run block) and the exit code says how it ended.

What differs between baselines (their extra flags, how their code is hooked and run) each
adapter gives as a Baseline: a few values and functions that run_adapter calls.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NoReturn, Protocol

from baselines import common, mapping
from baselines.common import A
from runrecord import RecordError, RunWriter, error_entry, exits, run_folder, schema


class AdapterRun(Protocol):
    """One run of a baseline, hooked into its code; run_adapter records what it reports."""

    updates: int
    episodes: int
    error: str | None
    """A failure the run caught itself (an actor died, a hook raised), or None."""

    def train(self) -> str:
        """Run the baseline to the end; the status (schema.COMPLETED, INTERRUPTED or FAILED)."""
        ...

    def close(self) -> dict[str, Any]:
        """Tidy the baseline's own files; the manifest's baseline_run block at the end."""
        ...

    def summary(self) -> dict[str, Any]:
        """The record's summary (runrecord.schema.summary)."""
        ...

    def failure(self, error: object) -> str:
        """What to print after 'error: ' when the run failed with `error`."""
        ...


@dataclass(frozen=True)
class Launch(Generic[A]):
    """What run_adapter has worked out when the baseline takes over (Baseline.start)."""

    args: A
    code: Any
    """What Baseline.load returned: the baseline's modules."""
    writer: RunWriter
    protocol: dict[str, Any]
    native_dir: Path
    """Where the baseline's own files go: <run dir>/native."""
    on_cuda: bool
    plan: dict[str, Any] | None
    """What Baseline.plan returned."""


def no_plan(args: Any, native_dir: Path) -> None:
    return None


def no_provenance(code: Any) -> dict[str, Any]:
    return {}


def torch_sees_gpu() -> bool:
    # Imported only here: a skipped run needs no torch, and the adapter module has set
    # OMP_NUM_THREADS before this runs.
    import torch

    return bool(torch.cuda.is_available())


@dataclass(frozen=True)
class Checkout:
    """Where the user keeps a baseline's code (common.find_checkout)."""

    name: str
    """names the checkout flag and messages: --<name>-path"""
    env_var: str
    """the alternative to the flag"""
    marker: str
    """a file every checkout has, relative to its root; its hash is recorded"""
    url: str
    """the repository to clone"""


@dataclass(frozen=True)
class Baseline(Generic[A]):
    """The parts of an adapter that differ between baselines."""

    system: str
    """e.g. monobeast-impala (harness.sweep.systems)"""
    args: type[A]
    prog: str
    """e.g. python -m baselines.monobeast"""
    checkout: Checkout
    load: Callable[[Path], Any]
    """checkout -> the baseline's modules, or common.BaselineUnavailable"""
    extra_columns: tuple[str, ...]
    """updates.csv columns beyond the schema's"""
    start: Callable[[Launch[A]], AdapterRun | int]
    """hooks the baseline's code; the run, or an exit code (the record then finished)"""
    plan: Callable[[A, Path], dict[str, Any] | None] = no_plan
    """(args, native dir) -> the manifest's first baseline_run block (None: none yet);
    raises mapping.MappingError for settings the baseline cannot express"""
    provenance: Callable[[Any], dict[str, Any]] = no_provenance
    """the loaded modules -> what the manifest's provenance adds about them"""
    cuda_available: Callable[[], bool] = torch_sees_gpu
    """asked once the checkout is loaded, for --use-cuda"""


def run_adapter(baseline: Baseline[A], argv: list[str] | None = None) -> int:
    """The adapter's main(): run the baseline once into a run record; the exit code."""
    args = common.parse_cli(baseline.args, argv, baseline.prog)
    if args is None:
        return exits.EXIT_BAD_INPUT
    hp = args.hyperparameters()
    protocol = common.baseline_protocol(args.env_id)

    def manifest_for(provenance: dict[str, Any], device: str) -> dict[str, Any]:
        return common.build_manifest(baseline.system, args.env_id, args.seed, hp, protocol,
                                     device, provenance, args.sweep, args.run_id)

    probe = manifest_for({"path": None}, "cpu")
    run_dir = Path(args.run_dir or run_folder(args.results_root, args.sweep or None,
                                              probe["run_id"]))
    native_dir = run_dir.resolve() / "native"
    try:
        plan = baseline.plan(args, native_dir)
    except mapping.MappingError as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.EXIT_BAD_INPUT

    where = baseline.checkout
    found = common.load_checkout(
        args.checkout(), where.env_var, where.name, where.marker, where.url, baseline.load,
        run_dir, lambda provenance: manifest_for(provenance, "cpu"),
    )
    if found is None:
        return exits.EXIT_UNAVAILABLE
    checkout, code = found

    on_cuda = args.use_cuda and baseline.cuda_available()
    provenance = {**common.checkout_info(checkout, where.marker),
                  **baseline.provenance(code)}
    manifest = manifest_for(provenance, "cuda" if on_cuda else "cpu")
    if plan is not None:
        manifest["baseline_run"] = plan
    try:
        writer = RunWriter(run_dir, manifest, extra_update_columns=baseline.extra_columns)
    except RecordError as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.EXIT_BAD_INPUT
    run = baseline.start(Launch(args, code, writer, protocol, native_dir, on_cuda, plan))
    if isinstance(run, int):
        return run
    return _train(baseline.system, run, writer)


def run_as_main(baseline: Baseline[Any]) -> NoReturn:
    """`python -m baselines.<adapter>`: run_adapter, then leave without joining the
    baseline's threads and processes, the record being written: monobeast's learner
    threads are not daemons and may wait forever on an empty queue after an interrupt or
    a failure; moolib's env processes and RPC threads need not be joined."""
    code = run_adapter(baseline)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _train(system: str, run: AdapterRun, writer: RunWriter) -> int:
    """Train, finish the record whatever happens, and say how it ended (the exit code)."""
    print(f"{system}: record in {writer.run_dir}", flush=True)
    status: str = schema.FAILED
    error: dict | BaseException | None = None
    try:
        status = run.train()
        if status == schema.FAILED and run.error:
            error = error_entry("BaselineError", run.error.splitlines()[0], run.error)
    except BaseException as e:  # noqa: BLE001 - the record must say what happened
        error = e
        status = schema.INTERRUPTED if isinstance(e, KeyboardInterrupt) else schema.FAILED
    finally:
        writer.set(baseline_run=run.close())
        writer.finish(status, error=error, summary=run.summary())
    print(f"{system}: {status}; {run.updates} updates, {run.episodes} episodes; "
          f"record in {writer.run_dir}", flush=True)
    if status == schema.FAILED:
        print(f"error: {run.failure(error)}", file=sys.stderr)
    return exits.run_exit(status)
