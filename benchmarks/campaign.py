"""The GPU campaign: evidence that grows with every GPU lease (results/hardware/README.md).

    python benchmarks/campaign.py plan                  # here: what the next lease does
    bash .device/run.sh --campaign --out $OUT           # there: one lease (<= 8 minutes)
    python benchmarks/campaign.py merge DIR_OR_ARCHIVE  # here: its records into the store

`plan` reads the committed store (results/hardware) and says which device kind the next
call should name (the one with fewer chunk (a) seeds), what its lease will run, and the
exact device-tool call. `lease` (campaign_lease.py; run.sh --campaign calls it with the
budget left) continues the plan of the machine it runs on and writes lease.json,
records.tar.gz, lease.md and steps.log after every item. `merge` (campaign_merge.py) files a
lease's records under results/hardware/<device kind>/<stack>/, by each record's own
provenance, never overwriting. Chunks: (a) cross-hardware equivalence on CartPole (PPO
and IMPALA), (b) learning at equal frames against the reference Cleanba (Breakout PPO),
(c) what bounds our speed at the paper's settings, (d) --deterministic run to run.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from campaign_lease import GPU_TOGETHER_S, LeaseConfig, run_lease  # noqa: E402
from campaign_merge import merge  # noqa: E402
from campaign_state import (  # noqa: E402
    CHUNKS,
    GPU_ESTIMATE_S,
    STORE,
    Place,
    equivalence_seeds_by_kind,
    estimate_s,
    fit,
    next_tool_kind,
    places,
    plan_items,
    sweep_run_ids,
    tool_kind,
)

from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK  # noqa: E402
from runrecord.words import counted  # noqa: E402

DEVICE_CALL = ('run(command="bash .device/run.sh --campaign --out $OUT", carry=[".device"], '
               'timeout_s=540, kind="{kind}")')
LEASE_BUDGET_S = 470.0


@dataclass
class PlanConfig:
    """Say what the next lease does and the exact device call (reads the store only)."""

    store: Path = STORE
    """The committed store."""


@dataclass
class MergeConfig:
    """File a lease's records (its records.tar.gz, or the folder holding it) in the store."""

    archives: tyro.conf.Positional[tuple[Path, ...]]
    """records.tar.gz of one or more leases (or the folders that hold them)."""
    store: Path = STORE
    """The store to merge into (a tiny lease's records only into another one)."""


def place_lines(place: Place, expected: dict[int, set[str]]) -> list[str]:
    seeds = place.equivalence_seeds(expected)
    return [f"  {place.kind}/{place.stack}: (a) {counted(len(seeds), 'seed')} "
            f"{seeds[:12]}{' ...' if len(seeds) > 12 else ''}; (b) seeds "
            f"{place.learning_seeds or 'none'}; (c) {speed_bound_line(place)}"
            f"; (d) {'done' if place.deterministic else 'not yet'}; "
            f"{counted(len(place.leases), 'lease')} merged"]


def speed_bound_line(place: Place) -> str:
    """Chunk (c) of a place: the faster actor mode its latest comparison found."""
    if place.faster_modes:
        lease = max(place.faster_modes)
        return f"done, faster actor mode {place.faster_modes[lease]['mode']} (lease {lease})"
    if place.speed_bound:  # made before chunk (c) compared the modes: measured again
        return "serial mode only, both modes not yet"
    return "not yet"


def plan(cfg: PlanConfig) -> int:
    names = sweep_run_ids()
    found = places(cfg.store)
    print(f"GPU campaign store: {cfg.store}")
    for chunk, what in CHUNKS.items():
        print(f"  chunk ({chunk}): {what}")
    print("What it holds:" if found else "What it holds: nothing yet")
    for place in found:
        for line in place_lines(place, names):
            print(line)
    seeds = equivalence_seeds_by_kind(cfg.store, names)
    kind = next_tool_kind(cfg.store, names)
    print("Chunk (a) seeds per lent kind: " + ", ".join(f"{k} {n}" for k, n in seeds.items())
          + f" -> the next call names kind={kind!r} (fewer seeds"
          + (", or the first on a tie)" if len(set(seeds.values())) == 1 else ")"))
    cpu = [p for p in found if p.kind == "cpu"]
    gpu = [p for p in found if tool_kind(p.kind) == kind]
    # the image's stack is the CPU records' (they were made on it); a new kind starts there
    stack = gpu[-1].stack if gpu else cpu[-1].stack if cpu else "(its stack)"
    place = gpu[-1] if gpu else Place(f"({kind}'s device kind)", stack)
    items = plan_items(place, names)
    estimates = {c: estimate_s(place, c, GPU_ESTIMATE_S) for c in "abcd"}
    estimates["c"] += GPU_TOGETHER_S  # as the lease counts it: both modes' together runs
    chosen = fit(items, LEASE_BUDGET_S, estimates)
    print(f"Its lease continues the plan of {place.kind}/{stack}: "
          f"{', '.join(i.name for i in items[:10])} ...")
    print(f"  at ~{', '.join(f'({c}) {s:.0f} s' for c, s in estimates.items())} per item it "
          f"runs {', '.join(i.name for i in chosen)} (~{sum(estimates[i.chunk] for i in chosen):.0f}"
          f" of {LEASE_BUDGET_S:.0f} s); the rest waits for the next lease")
    if not cpu:
        print("  (no CPU records: chunk (a)'s verdicts need them; results/hardware/README.md)")
    print("The call, in order:")
    print("  here:   python benchmarks/device_kit.py --out .device --reference-path "
          "<checkout of vwxyzjn/cleanba>\n"
          "          (an export without .git: add --reference-note "
          "github:vwxyzjn/cleanba@<commit>)")
    print(f"  device: {DEVICE_CALL.format(kind=kind)}")
    print("  here:   python benchmarks/campaign.py merge <files_at>/records.tar.gz && "
          "git add results/hardware && git commit")
    return EXIT_OK


def do_merge(cfg: MergeConfig) -> int:
    code = EXIT_OK
    for archive in cfg.archives:
        lease_mode = _mode(archive)
        if lease_mode == "tiny" and cfg.store.resolve() == STORE.resolve():
            print(f"error: {archive} is a tiny lease (a rehearsal): merge it into another "
                  "--store, never into results/hardware", file=sys.stderr)
            return EXIT_BAD_INPUT
        merged = merge(archive, cfg.store)
        for line in merged.lines():
            print(line)
        if merged.conflicts:
            code = EXIT_FAILED
    return code


def _mode(archive: Path) -> str:
    from campaign_lease import read_archive

    lease, tar = read_archive(archive)
    tar.close()
    return str(lease.get("mode"))


def main() -> int:
    cfg = tyro.extras.subcommand_cli_from_dict(
        {"plan": PlanConfig, "lease": LeaseConfig, "merge": MergeConfig},
        description=__doc__.split("\n\n")[0])
    try:
        if isinstance(cfg, PlanConfig):
            return plan(cfg)
        if isinstance(cfg, MergeConfig):
            return do_merge(cfg)
        check_lease(cfg)
        facts = run_lease(cfg)
        return EXIT_OK if not facts["failed"] else EXIT_FAILED
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def check_lease(cfg: LeaseConfig) -> None:
    """Bad input: ValueError before anything is written."""
    if set(cfg.chunks) - set(CHUNKS):
        raise ValueError(f"--chunks {cfg.chunks!r}: letters of {''.join(CHUNKS)}")
    if cfg.budget_s < 30:
        raise ValueError(f"--budget-s {cfg.budget_s}: at least 30 s")
    if min(cfg.seeds_per_round, cfg.rounds) < 1:
        raise ValueError("--seeds-per-round and --rounds must be >= 1")
    if cfg.reference_path is not None and not (cfg.reference_path / "cleanba" /
                                               "cleanba_ppo.py").is_file():
        raise ValueError(f"--reference-path {cfg.reference_path}: no cleanba/cleanba_ppo.py")
    if cfg.out.exists() and not cfg.out.is_dir():
        raise ValueError(f"--out {cfg.out} exists and is not a folder")


if __name__ == "__main__":
    sys.exit(main())
