"""results.md of `benchmarks/gpu_suite.py`: the tables, from results.json alone (pure)."""

from __future__ import annotations

import statistics
from typing import Any

from runrecord.words import counted

NOT_YET = "not yet measured"

TRAINING_ROWS = (  # (label, step, index into the step's runs or None)
    ("ours PPO", "ours-ppo", None),
    ("ours IMPALA", "ours-impala", None),
    ("reference Cleanba PPO", "reference-ppo", None),
    ("ours PPO --deterministic, run 1", "deterministic", 0),
    ("ours PPO --deterministic, run 2", "deterministic", 1),
)
OPTIONAL_ROWS = (  # rows of steps run only on request (gpu_suite OPTIONAL_STEPS), when run
    ("ours PPO on ALE (--env-backend ale)", "ale-ppo", None),
)


def num(x: Any, digits: int = 1) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float) and x != x:
        return "n/a"
    return f"{x:,.{digits}f}"


def ratio(a: Any, b: Any) -> float | None:
    return a / b if isinstance(a, int | float) and isinstance(b, int | float) and b else None


def environment_lines(env: dict[str, Any] | None) -> list[str]:
    if not env:
        return [f"- {NOT_YET}"]
    if "error" in env:
        return [f"- environment probe failed: {env['error']}"]
    gpus = env.get("nvidia_smi") or []
    devices = env.get("devices") or []
    lines = [
        "- devices: " + ", ".join(
            f"{d['kind']} ({num((d.get('memory_limit_bytes') or 0) / 1024**3)} GiB for JAX)"
            if d.get("memory_limit_bytes") else d["kind"] for d in devices),
        "- nvidia-smi: " + ("; ".join(f"{g.get('name')}, {g.get('memory.total')}, driver "
                                      f"{g.get('driver_version')}" for g in gpus) or "none"),
        f"- CUDA runtime {env.get('cuda_runtime', 'n/a')}, CUDA driver "
        f"{env.get('cuda_driver', 'n/a')}, cuDNN {env.get('cudnn', 'n/a')}, cuBLAS "
        f"{env.get('cublas', 'n/a')}",
        f"- jax {env.get('jax')}, jaxlib {env.get('jaxlib')}, envpool {env.get('envpool')}, "
        f"Python {env.get('python')}",
        f"- CPU: {env.get('cpu_model')}, {env.get('cpu_cores')} cores "
        f"({env.get('cpu_cores_usable')} usable); load average at the probe "
        f"{' / '.join(num(x, 2) for x in env.get('load_average', []))}",
        f"- measured at {env.get('measured_at', '?')} UTC",
    ]
    return lines


def actor_lines(raw: dict[str, Any] | None, overhead: dict[str, Any] | None) -> list[str]:
    lines = ["| what | env steps/s | EnvPool raw, same envs and threads | ratio (each repeat) "
             "| ratio per CPU-second (each repeat) | load average |",
             "|---|---|---|---|---|---|"]
    if raw and "steps_per_s" in raw:
        lines.append(f"| EnvPool raw, Breakout-v5, {raw['num_envs']} envs on "
                     f"{raw['num_threads']} threads | {num(raw['steps_per_s'], 0)} | | | | "
                     f"{num(raw['load_average_after'][0], 2)} |")
    else:
        lines.append(f"| EnvPool raw, Breakout-v5 | {failed_or_not_yet(raw)} | | | | |")
    rows = (overhead or {}).get("rows")
    if not rows:
        lines.append(f"| actor loop, no-op forward | {failed_or_not_yet(overhead)} | | | | |")
    for r in rows or []:
        lines.append(
            f"| actor loop, no-op forward, {r['num_envs']} envs x "
            f"{counted(r['num_threads'], 'thread')} | {num(statistics.median(r['actor_loop']), 0)} | "
            f"{num(statistics.median(r['raw']), 0)} | "
            f"{median_and_each(r['ratios'])} | {median_and_each(r.get('cpu_ratios'))} "
            f"| {num(r['load_average'][0], 2)} |")
    return lines


def median_and_each(values: list[float] | None) -> str:
    if not values:
        return "n/a"
    return f"{num(statistics.median(values), 2)} ({', '.join(num(x, 2) for x in values)})"


def failed_or_not_yet(entry: dict[str, Any] | None) -> str:
    if not entry:
        return NOT_YET
    if "error" in entry:
        return f"failed: {entry['error']}"
    if "not_run" in entry:
        return f"not run: {entry['not_run']}"
    return f"failed (exit {entry.get('exit_code')}; see the log)"


def training_row(label: str, run: dict[str, Any] | None, parent: dict[str, Any] | None) -> str:
    if not run or "steady_sps" not in run:
        return f"| {label} | {failed_or_not_yet(parent if run is None else run)} | | | | | | |"
    status = "completed" if run["exit_code"] == 0 else (
        "cut at timeout" if run["timed_out"] else f"exit {run['exit_code']}")
    halves = f"{num(run['first_half_sps'], 0)} / {num(run['second_half_sps'], 0)}"
    return (f"| {label} | {num(run['first_update_s'])} | {num(run['steady_sps'], 0)} | {halves} "
            f"| {num(run['device_peak_gb'], 2)} | {num(run['peak_rss_gb'], 2)} | "
            f"{run['updates_done']}/{run['updates_planned']} | {status} |")


def training_lines(steps: dict[str, Any]) -> list[str]:
    lines = ["| run | first update (s from launch) | steady SPS | SPS 1st / 2nd half | device "
             "peak GiB | host peak RSS GiB | updates | status |",
             "|---|---|---|---|---|---|---|---|"]
    for label, step, index in (*TRAINING_ROWS, *(r for r in OPTIONAL_ROWS if r[1] in steps)):
        entry = steps.get(step)
        run = entry
        if index is not None:
            run = (entry or {}).get("runs", [None, None])[index]
        lines.append(training_row(label, run, entry))
    ours_run, ref = steps.get("ours-ppo") or {}, steps.get("reference-ppo") or {}
    if ref.get("steady_sps") is None:
        ref = {}  # no ratios against a reference that did not run or failed
    cells = [num(ratio(ours_run.get(k), ref.get(k)), 2)
             for k in ("first_update_s", "steady_sps", "device_peak_gb", "peak_rss_gb")]
    lines.append(f"| ratio ours / reference (PPO) | {cells[0]} | {cells[1]} | | {cells[2]} | "
                 f"{cells[3]} | | |")
    return lines


def deterministic_lines(steps: dict[str, Any]) -> list[str]:
    det = steps.get("deterministic")
    plain = (steps.get("ours-ppo") or {}).get("steady_sps")
    if not det or "runs" not in det:
        return [f"- `--deterministic`: {failed_or_not_yet(det)}"]
    det_sps = [r.get("steady_sps") for r in det["runs"]]
    mean_det = statistics.mean(det_sps) if all(s is not None for s in det_sps) else None
    same = "identical" if det["checksums_identical"] else (
        f"DIFFERENT from update {det['first_mismatch_update']}")
    return [f"- SPS with `--deterministic` / without (ours PPO): {num(ratio(mean_det, plain), 2)} "
            f"({num(mean_det, 0)} vs {num(plain, 0)} steady SPS)",
            f"- params checksums of the two `--deterministic` runs: {same} "
            f"({det['updates_compared']} updates compared)"]


def learning_lines(steps: dict[str, Any]) -> list[str]:
    """Our PPO's last-100-episode return at its last update's frames, the reference's
    avg_episodic_return at the same frames, the random score (benchmarks/suite_learning.py)."""
    ours_run = steps.get("ours-ppo") or {}
    ours_line = ours_run.get("learning")
    if not ours_line or "error" in (ours_line or {}):
        why = (ours_line or {}).get("error") or failed_or_not_yet(ours_run or None)
        return [f"- ours PPO: {why}"]
    ref = steps.get("reference-ppo") or {}
    ref_line = ref.get("learning")
    if ref_line:
        ref_text = (f"{num(ref_line['avg_episodic_return'], 2)} (its avg_episodic_return at "
                    f"{num(ref_line['frames'], 0)} frames)")
    else:
        ref_text = failed_or_not_yet(ref or None)
    return [f"- ours PPO, {ours_line['env_id']}, after {num(ours_line['frames'], 0)} frames: "
            f"{num(ours_line['last_episodes_mean_return'], 2)} (mean return of the last "
            f"{ours_line['episodes_averaged']} episodes; {ours_line['episodes_ended']} ended)",
            f"- reference Cleanba PPO at the same frames: {ref_text}",
            f"- random score: {num(ours_line['random_score'], 1)}"]


def plan_lines(results: dict[str, Any]) -> list[str]:
    planned = results.get("planned_s") or {}
    if not planned:
        return []
    steps = results.get("steps", {})
    lines = [f"Budget {num(results.get('budget_s'), 0)} s; each step's planned share, its "
             "cap when it started (share plus time saved before it) and its wall time:", "",
             "| step | planned s | cap s | measured s |", "|---|---|---|---|"]
    for step, share in planned.items():
        entry = steps.get(step) or {}
        lines.append(f"| {step} | {num(share, 0)} | {num(entry.get('cap_s'), 0)} | "
                     f"{num(entry.get('step_wall_s'), 0)} |")
    return lines


def render_markdown(results: dict[str, Any]) -> str:
    steps = results.get("steps", {})
    out = [f"# GPU suite results ({results.get('mode', '?')})", "",
           "Written by `python benchmarks/gpu_suite.py` (docs/performance.md explains every "
           "figure). Steady SPS leaves out the first 2 updates.", "", "## Machine", "",
           *environment_lines(steps.get("environment")), "", "## Actor side", "",
           *actor_lines(steps.get("envpool-raw"), steps.get("actor-overhead")), "",
           "## Training: Breakout-v5, layout a0-l0, cleanba architecture", "",
           *training_lines(steps), "", "## Learning line", "", *learning_lines(steps), "",
           "## --deterministic", "", *deterministic_lines(steps), "", "## Time per step", "",
           *plan_lines(results)]
    ref = steps.get("reference-ppo") or {}
    if ref.get("patch"):
        out += ["", "## Patch applied to the reference (to a copy in the work folder)", "",
                *[f"- {line}" for line in ref["patch"]]]
    commands = [(name, s["command"]) for name, s in steps.items() if s.get("command")]
    commands += [(f"deterministic run {i + 1}", r["command"])
                 for i, r in enumerate((steps.get("deterministic") or {}).get("runs", []))]
    if commands:
        out += ["", "## Commands that ran", ""]
        out += [f"- {name}: `{cmd}`" for name, cmd in commands]
    return "\n".join(out) + "\n"
