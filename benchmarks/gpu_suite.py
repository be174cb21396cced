"""Everything a GPU user needs to know about speed, in one call of at most 8 minutes:

    bash .device/run.sh --out $OUT          # on the lent GPU machine (docs/performance.md)
    python benchmarks/gpu_suite.py --out results/gpu-suite [--reference-path ~/src/cleanba]

The plan (--budget-s, 470 s by default; run.sh passes what its 480 s leave after the kit's
install). Steps run in this order, each with its own cap; a step's cap is the budget left
minus the shares of the steps after it, so time a step saves goes to the next, and a
failing or slow step never takes a later step's share:
  environment (share 5 s): versions, devices, driver, CUDA, CPU;
  envpool-raw (15 s): EnvPool's raw Breakout rate, 128 envs on 2 threads (the paper's
    actor setting);
  actor-overhead (60 s): the actor loop with a no-op forward pass against raw EnvPool, a
    short grid (--actor-grid, 128x2 32x2 8x2; the settings done by the cap are kept; on
    an H100 the first, the paper's, takes ~46 s);
  ours-ppo (125 s): our PPO at the paper's settings, 25 updates (409,600 steps, 1.6M frames),
    with the learning line (last-100-episode return, benchmarks/suite_learning.py);
  reference-ppo (135 s): the reference Cleanba PPO on the same settings (--reference-path);
  ours-impala (40 s): our IMPALA at the paper's settings, 60 updates (153,600 steps);
  deterministic (90 s): our PPO with --deterministic, twice (half the cap each): SPS cost
    against ours-ppo, and whether the two runs' params checksums agree at every update.
On request only (--only ... ale-ppo; not in the default plan, whose shares are fitted):
  ale-ppo (125 s): ours-ppo again on the ALE backend (--env-backend ale): its SPS and its
    learning line beside ours-ppo's at the same frames (docs/cleanba.md).
A training run reaching its cap gets SIGTERM (its finished updates count) and is killed
10 s later. `--tiny` runs every step with small budgets on CPU (1500 s budget).

--out gets results.md, results.json and steps.log (each step's child log, appended),
rewritten after every step, so a call cut off still returns what finished; the runs
themselves go to --workdir (a temporary folder by default). Settings (the paper's,
../shared/CLEANBA-FACTS.md): PPO 128 envs (2 actor threads x 64) x 128 steps, 4
minibatches x 4 epochs; IMPALA 128 envs x 20 steps; layout a0-l0 (actor and learner on
GPU 0), architecture cleanba. Steady-state SPS = env steps / seconds between the end of
update 2 and the last update (update 1 compiles, update 2 overlaps the queue-of-one start;
the reference also recompiles at its second update); the table also gives the SPS of the
window's first and second halves, which agree when the run is steady.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from reference_cleanba import (  # noqa: E402
    ReferenceError,
    patch_lines,
    patched_script,
    reference_args,
)
from suite_learning import ours_learning, reference_learning  # noqa: E402

from runrecord.cli_help import parse_config  # noqa: E402
from runrecord.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK  # noqa: E402
from runrecord.writer import atomic_write_text  # noqa: E402

CHILD = ROOT / "benchmarks" / "measured_run.py"
ENV_ID = "Breakout-v5"
WARMUP_UPDATES = 2  # updates left out of steady-state SPS (compilation, queue start)
# (step, share of the budget in seconds at the default 470 s); the order is the run order.
# Fitted to the first H100 call (2026-11-27, docs/performance.md): environment 3 s,
# envpool-raw 17 s, one actor-overhead setting (128x2) 46 s, our PPO 4.5 s per update after
# a 56 s first update, the reference 72 s to its first update then ~4.5 s per update, our
# IMPALA 84 updates in 66 s, one --deterministic run of 5 updates ~40 s.
SHARES = (("environment", 5), ("envpool-raw", 15), ("actor-overhead", 60), ("ours-ppo", 125),
          ("reference-ppo", 135), ("ours-impala", 40), ("deterministic", 90))
ALL_STEPS = tuple(step for step, _ in SHARES)
OPTIONAL_SHARES = (("ale-ppo", 125),)  # steps run only when --only names them
OPTIONAL_STEPS = tuple(step for step, _ in OPTIONAL_SHARES)
DEFAULT_BUDGET_S = 470.0
TINY_BUDGET_S = 1500.0
KILL_GRACE_S = 10.0  # a run gets SIGTERM this long before its cap, then SIGKILL at the cap
MIN_CAP_S = 5.0  # a step with less than this left is not started (the results say so)
LOG_CHARS = 100_000  # the tail of each child's log kept in steps.log


@dataclass
class SuiteConfig:
    """The GPU benchmark suite (docs/performance.md)."""

    out: Path
    """Results folder: results.md, results.json, steps.log (created; earlier steps kept)."""
    reference_path: Path | None = None
    """Checkout of vwxyzjn/cleanba (or the kit's reference/); without it the reference row
    says 'not run'."""
    only: tuple[str, ...] = ()
    """Run just these steps (names as in results.json); the budget is shared among them."""
    tiny: bool = False
    """Small budgets for a CPU check of the whole sequence (a few minutes)."""
    budget_s: float | None = None
    """Seconds for all the steps together (default 470; with --tiny 1500)."""
    workdir: Path | None = None
    """Where the runs write (run records, child logs); default: a new temporary folder."""
    actor_grid: tuple[str, ...] = ("128x2", "32x2", "8x2")
    """ENVSxTHREADS settings of the actor-overhead step, in this order (the paper's first;
    ignored with --tiny: 8x1 8x2)."""
    actor_timed_steps: int = 16384
    """Env steps timed per setting and repeat in the actor-overhead step."""
    repeats: int = 2
    """Raw/actor-loop measurements per setting, alternated (the ratio is their median)."""
    seed: int = 1
    """Seed of every run."""


@dataclass(frozen=True)
class Budget:
    """Sizes of the training runs (the paper's, or tiny ones)."""

    ppo: tuple[str, ...]
    ppo_batch: int
    ppo_updates: int
    impala: tuple[str, ...]
    impala_updates: int
    impala_batch: int
    deterministic_updates: int
    raw: dict[str, int] = field(default_factory=dict)


FULL = Budget(
    ppo=("--num-envs", "128", "--num-steps", "128", "--num-actor-threads", "2"),
    ppo_batch=128 * 128, ppo_updates=25,
    impala=("--num-envs", "128", "--num-steps", "20", "--num-actor-threads", "2"),
    impala_batch=128 * 20, impala_updates=60, deterministic_updates=5,
    raw={"num_envs": 128, "num_threads": 2, "steps_per_thread": 1024},
)
TINY = Budget(
    ppo=("--num-envs", "8", "--num-steps", "32", "--num-actor-threads", "2",
         "--num-minibatches", "2", "--update-epochs", "1"),
    ppo_batch=8 * 32, ppo_updates=10,  # 320 steps per env: episodes end (the learning line)
    impala=("--num-envs", "8", "--num-steps", "16", "--num-actor-threads", "2",
            "--num-minibatches", "2"),
    impala_batch=8 * 16, impala_updates=6, deterministic_updates=5,
    raw={"num_envs": 8, "num_threads": 2, "steps_per_thread": 64},
)


def flag_value(args: tuple[str, ...], flag: str, default: int) -> int:
    return int(args[args.index(flag) + 1]) if flag in args else default


# --------------------------------------------------------------------------------------
# running children


def run_child(spec: dict[str, Any], workdir: Path, cap_s: float,
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run measured_run.py on `spec`, stopped by its cap (SIGTERM KILL_GRACE_S before it,
    SIGKILL at it): (its result JSON or {}, process facts: exit code, wall s, peak RSS GB,
    timed_out, log path)."""
    workdir.mkdir(parents=True, exist_ok=True)
    name = spec["name"]
    spec = {**spec, "out": str(workdir / f"{name}.json"), "launched_at": time.time()}
    spec_path = workdir / f"{name}.spec.json"
    spec_path.write_text(json.dumps(spec, indent=2))
    log = workdir / f"{name}.log"
    start = time.monotonic()
    with open(log, "w") as log_file:
        proc = subprocess.Popen([sys.executable, str(CHILD), str(spec_path)], stdout=log_file,
                                stderr=subprocess.STDOUT, cwd=ROOT)
        timed_out = False
        grace = min(KILL_GRACE_S, cap_s / 4)
        deadline: float | None = start + cap_s - grace
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.monotonic() > deadline and not timed_out:
                timed_out = True
                proc.send_signal(signal.SIGTERM)  # our trainer records `interrupted`
                deadline = time.monotonic() + grace
            elif timed_out and deadline is not None and time.monotonic() > deadline:
                proc.kill()
                deadline = None
            time.sleep(0.2)
    facts = {"exit_code": os.waitstatus_to_exitcode(status), "wall_s": time.monotonic() - start,
             "peak_rss_gb": usage.ru_maxrss / 1024**2, "timed_out": timed_out,
             "log": log.name, "cap_s": cap_s}
    out = Path(spec["out"])
    result = json.loads(out.read_text()) if out.exists() else {}
    return result, facts


def log_tail(workdir: Path, name: str, chars: int = 1500) -> str:
    path = workdir / f"{name}.log"
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


# --------------------------------------------------------------------------------------
# figures of one training run (pure functions of what the run left)


def read_updates(run_dir: Path) -> list[dict[str, str]]:
    path = run_dir / "updates.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [row for row in csv.DictReader(f) if row.get("update")]


def window_sps(steps: list[float], times: list[float], skip: int = WARMUP_UPDATES,
               ) -> dict[str, float | None]:
    """Steady-state SPS over updates skip+1..last (env steps at each update's end, times
    in seconds), and the SPS of the window's two halves."""
    if len(steps) < skip + 2:
        return {"steady_sps": None, "first_half_sps": None, "second_half_sps": None}

    def rate(a: int, b: int) -> float | None:
        dt = times[b] - times[a]
        return (steps[b] - steps[a]) / dt if dt > 0 and b > a else None

    first, last = skip - 1, len(steps) - 1
    mid = (first + last) // 2
    return {"steady_sps": rate(first, last), "first_half_sps": rate(first, mid),
            "second_half_sps": rate(mid, last)}


def run_figures(child: dict[str, Any], facts: dict[str, Any], steps: list[float],
                times: list[float], planned_updates: int) -> dict[str, Any]:
    """The table's figures of one run from its update steps/times and process facts."""
    update_times = child.get("update_times", [])
    memory = child.get("device_memory")
    return {
        **window_sps(steps, times),
        "updates_done": len(steps), "updates_planned": planned_updates,
        "first_update_s": (update_times[0] - child["launched_at"]) if update_times else None,
        "device_peak_gb": memory["peak_bytes_in_use"] / 1024**3 if memory else None,
        "device_kinds": child.get("device_kinds"),
        **facts,
    }


def ours(cfg: SuiteConfig, workdir: Path, name: str, module: str, args: tuple[str, ...],
         batch: int, updates: int, cap_s: float) -> dict[str, Any]:
    run_dir = workdir / name / "run"
    argv = ["atari", "--env-id", ENV_ID, *args, "--architecture", "cleanba",
            "--actor-device-ids", "0", "--learner-device-ids", "0", "--seed", str(cfg.seed),
            "--total-timesteps", str(batch * updates), "--progress-interval-s", "30",
            "--run-dir", str(run_dir)]
    child, facts = run_child({"task": "train", "name": name, "module": module, "argv": argv},
                             workdir, cap_s)
    rows = read_updates(run_dir)
    figures = run_figures(child, facts, [float(r["env_steps"]) for r in rows],
                          [float(r["wall_time_s"]) for r in rows], updates)
    figures["command"] = f"python -m {module} {' '.join(argv)}"
    figures["checksums"] = [r.get("params_checksum", "") for r in rows]
    if name in ("ours-ppo", "ale-ppo"):
        figures["learning"] = ours_learning(run_dir, ENV_ID)
    return figures


def reference(cfg: SuiteConfig, workdir: Path, budget: Budget, cap_s: float,
              frames: float | None) -> dict[str, Any]:
    """The reference PPO's figures, and its learning line at `frames` (our PPO's last
    update's frames; None: its own last)."""
    assert cfg.reference_path is not None
    script = patched_script(cfg.reference_path, workdir / "reference-ppo" / "patched")
    scalars = workdir / "reference-ppo" / "scalars.jsonl"
    scalars.unlink(missing_ok=True)
    args = budget.ppo
    argv = reference_args(
        ENV_ID, flag_value(args, "--num-envs", 128), flag_value(args, "--num-actor-threads", 2),
        flag_value(args, "--num-steps", 128), flag_value(args, "--num-minibatches", 4),
        budget.ppo_batch * budget.ppo_updates, cfg.seed)
    if "--update-epochs" in args:
        argv += ["--update-epochs", str(flag_value(args, "--update-epochs", 4))]
    child, facts = run_child({"task": "reference", "name": "reference-ppo", "script": str(script),
                              "argv": argv, "scalars": str(scalars)}, workdir, cap_s)
    losses = []
    if scalars.exists():
        for line in scalars.read_text().splitlines():
            entry = json.loads(line)
            if entry["tag"] == "losses/loss":
                losses.append(entry["time"])
    child["update_times"] = losses
    steps = [float(budget.ppo_batch * (i + 1)) for i in range(len(losses))]
    figures = run_figures(child, facts, steps, losses, budget.ppo_updates)
    figures["command"] = f"python {script.name} {' '.join(argv)}"
    figures["patch"] = patch_lines()
    figures["learning"] = reference_learning(scalars, frames)
    return figures


# --------------------------------------------------------------------------------------
# the steps


def run_step(step: str, cfg: SuiteConfig, results: dict[str, Any], workdir: Path,
             cap_s: float) -> dict:
    budget = TINY if cfg.tiny else FULL
    if step == "environment":
        child, facts = run_child({"task": "environment", "name": "environment"}, workdir, cap_s)
        return {**child, "exit_code": facts["exit_code"], "cap_s": cap_s}
    if step == "envpool-raw":
        child, facts = run_child({"task": "envpool-raw", "name": "envpool-raw", "env_id": ENV_ID,
                                  **budget.raw}, workdir, cap_s)
        return {**budget.raw, **child, "exit_code": facts["exit_code"], "cap_s": cap_s}
    if step == "actor-overhead":
        grid = ("8x1", "8x2") if cfg.tiny else cfg.actor_grid
        spec = {"task": "actor-overhead", "name": "actor-overhead", "env_id": ENV_ID,
                "grid": [[int(x) for x in g.split("x")] for g in grid],
                "num_steps": 16 if cfg.tiny else 128,
                "timed_steps": 512 if cfg.tiny else cfg.actor_timed_steps,
                "repeats": 1 if cfg.tiny else cfg.repeats}
        child, facts = run_child(spec, workdir, cap_s)
        if facts["timed_out"] and child.get("rows"):
            facts["exit_code"] = 0  # stopped on time by design; the finished settings count
        return {**child, "exit_code": facts["exit_code"], "num_steps": spec["num_steps"],
                "timed_out": facts["timed_out"], "cap_s": cap_s}
    if step == "ours-ppo":
        return ours(cfg, workdir, "ours-ppo", "cleanba.ppo", budget.ppo, budget.ppo_batch,
                    budget.ppo_updates, cap_s)
    if step == "ours-impala":
        return ours(cfg, workdir, "ours-impala", "cleanba.impala", budget.impala,
                    budget.impala_batch, budget.impala_updates, cap_s)
    if step == "reference-ppo":
        if cfg.reference_path is None:
            return {"not_run": "no --reference-path given (no reference in the kit)"}
        frames = ((results["steps"].get("ours-ppo") or {}).get("learning") or {}).get("frames")
        return reference(cfg, workdir, budget, cap_s, frames)
    if step == "deterministic":
        args = (*budget.ppo, "--deterministic")
        first = ours(cfg, workdir, "deterministic-1", "cleanba.ppo", args, budget.ppo_batch,
                     budget.deterministic_updates, cap_s / 2)
        second = ours(cfg, workdir, "deterministic-2", "cleanba.ppo", args, budget.ppo_batch,
                      budget.deterministic_updates, max(cap_s - first["wall_s"], 1.0))
        runs = [first, second]
        return {"runs": runs, "cap_s": cap_s,
                **compare_checksums(runs[0]["checksums"], runs[1]["checksums"])}
    if step == "ale-ppo":
        entry = ours(cfg, workdir, "ale-ppo", "cleanba.ppo", (*budget.ppo, "--env-backend", "ale"),
                     budget.ppo_batch, budget.ppo_updates, cap_s)
        envpool = results["steps"].get("ours-ppo") or {}
        entry["sps_vs_envpool"] = (entry.get("steady_sps") / envpool["steady_sps"]
                                   if entry.get("steady_sps") and envpool.get("steady_sps")
                                   else None)
        return entry
    raise AssertionError(step)


def step_caps(steps: tuple[str, ...], budget_s: float) -> dict[str, float]:
    """Each step's share of `budget_s`: SHARES scaled so the steps run share all of it."""
    shares = dict(SHARES + OPTIONAL_SHARES)
    total = sum(shares[s] for s in steps)
    return {s: shares[s] * budget_s / total for s in steps}


def cap_now(step: str, shares: dict[str, float], left_s: float) -> float:
    """The cap of `step` with `left_s` seconds of the budget left: what the steps after it
    leave (their shares stay theirs; time saved earlier goes to this step)."""
    order = list(shares)
    return left_s - sum(shares[s] for s in order[order.index(step) + 1:])


def compare_checksums(a: list[str], b: list[str]) -> dict[str, Any]:
    """Whether two runs' params checksums agree at every update both finished."""
    n = min(len(a), len(b))
    mismatch = next((i + 1 for i in range(n) if a[i] != b[i] or not a[i]), None)
    return {"updates_compared": n, "checksums_identical": n > 0 and mismatch is None,
            "first_mismatch_update": mismatch}


# --------------------------------------------------------------------------------------
# results


def main(cfg: SuiteConfig) -> int:
    steps = check_config(cfg)
    budget_s = cfg.budget_s or (TINY_BUDGET_S if cfg.tiny else DEFAULT_BUDGET_S)
    shares = step_caps(steps, budget_s)
    cfg.out.mkdir(parents=True, exist_ok=True)
    path = cfg.out / "results.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    results.setdefault("steps", {})
    workdir = cfg.workdir or Path(tempfile.mkdtemp(prefix="gpu-suite-"))
    results.update({"mode": "tiny" if cfg.tiny else "paper settings", "budget_s": budget_s,
                    # unrounded: the shares sum to the budget (rounded to 0.1 s each,
                    # they missed it by up to 0.05 s a step); the table rounds for display
                    "planned_s": dict(shares),
                    "workdir": str(workdir)})
    failed = False
    suite_start = time.monotonic()
    for step in steps:
        cap = cap_now(step, shares, budget_s - (time.monotonic() - suite_start))
        print(f"[gpu_suite] {step} (cap {cap:.0f} s) ...", flush=True)
        started = time.monotonic()
        before = set(workdir.glob("*.log")) if workdir.exists() else set()
        if cap < MIN_CAP_S:
            entry: dict[str, Any] = {"not_run": f"budget spent ({cap:.0f} s left for it)"}
        else:
            try:
                entry = run_step(step, cfg, results, workdir, cap)
            except Exception as exc:  # noqa: BLE001 - a failed step is recorded, the next runs
                entry = {"error": f"{type(exc).__name__}: {exc}"}
        entry.setdefault("cap_s", cap)
        entry["measured_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        entry["step_wall_s"] = time.monotonic() - started
        entry["load_average_after"] = list(os.getloadavg())
        if step_failed(entry):
            failed = True
            entry.setdefault("log_tail", log_tail(workdir, step))
        results["steps"][step] = entry
        append_logs(cfg.out / "steps.log", step, sorted(set(workdir.glob("*.log")) - before))
        write_results(cfg.out, results)
        print(f"[gpu_suite] {step} done in {entry['step_wall_s']:.0f}s"
              f"{' (FAILED)' if step_failed(entry) else ''}", flush=True)
    print(f"[gpu_suite] {cfg.out / 'results.md'}", flush=True)
    return EXIT_FAILED if failed else EXIT_OK


def append_logs(target: Path, step: str, logs: list[Path]) -> None:
    """Append the tail of each new child log to `target` (the one log file that comes back
    from the device machine with the results)."""
    with open(target, "a") as out:
        for log in logs:
            text = log.read_text(errors="replace")
            cut = f" (last {LOG_CHARS} chars)" if len(text) > LOG_CHARS else ""
            out.write(f"===== {step}: {log.name}{cut} =====\n{text[-LOG_CHARS:]}\n")


def step_failed(entry: dict[str, Any]) -> bool:
    """An error, or a non-zero exit, except a run stopped at its timeout with enough
    updates for a steady-state SPS (that is the plan working)."""
    if "error" in entry:
        return True
    if entry.get("timed_out") and entry.get("steady_sps") is not None:
        return False
    if entry.get("exit_code") not in (None, 0):
        return True
    return any(step_failed(r) for r in entry.get("runs", []))


def check_config(cfg: SuiteConfig) -> tuple[str, ...]:
    """The steps to run; raises ValueError on bad input (nothing written yet)."""
    unknown = [s for s in cfg.only if s not in ALL_STEPS + OPTIONAL_STEPS]
    if unknown:
        raise ValueError(f"--only: unknown step(s) {unknown}; steps: "
                         f"{', '.join(ALL_STEPS + OPTIONAL_STEPS)}")
    for g in cfg.actor_grid:
        envs, _, threads = g.partition("x")
        if not (envs.isdigit() and threads.isdigit() and int(threads) >= 1
                and int(envs) % int(threads) == 0):
            raise ValueError(f"--actor-grid: {g!r} is not ENVSxTHREADS with threads dividing envs")
    if cfg.reference_path is not None and not (cfg.reference_path / "cleanba" /
                                               "cleanba_ppo.py").is_file():
        raise ValueError(f"--reference-path {cfg.reference_path}: no cleanba/cleanba_ppo.py "
                         "(expected a checkout of vwxyzjn/cleanba)")
    if cfg.out.exists() and not cfg.out.is_dir():
        raise ValueError(f"--out {cfg.out} exists and is not a folder")
    if min(cfg.repeats, cfg.actor_timed_steps) <= 0:
        raise ValueError("--repeats and --actor-timed-steps must be positive")
    if cfg.budget_s is not None and cfg.budget_s < 60:
        raise ValueError(f"--budget-s {cfg.budget_s}: at least 60 s (the default is "
                         f"{DEFAULT_BUDGET_S:.0f}, with --tiny {TINY_BUDGET_S:.0f})")
    if cfg.only:
        return tuple(s for s in ALL_STEPS + OPTIONAL_STEPS if s in cfg.only)
    return ALL_STEPS


def write_results(out: Path, results: dict[str, Any]) -> None:
    from suite_table import render_markdown

    for name, text in (("results.json", json.dumps(results, indent=2)),
                       ("results.md", render_markdown(results))):
        atomic_write_text(out / name, text)


if __name__ == "__main__":
    config = parse_config(SuiteConfig, description=__doc__.split("\n\n")[0])
    try:
        code = main(config)
    except (ValueError, ReferenceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    sys.exit(code)
