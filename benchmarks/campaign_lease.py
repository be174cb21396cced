"""One lease of the GPU campaign: continue the plan of this machine's device kind and stack
for at most the budget, and return what finished (benchmarks/campaign.py `lease`).

Steps: probe the machine (a child process: the parent never starts JAX, so it holds no
GPU memory), read what the committed store (results/hardware) already has for this (kind,
stack), take the plan's items not done (campaign_state.plan_items), and run each that fits
in the time left, in order, each stopped at its cap. After every item the lease rewrites,
atomically, in --out:

    lease.json        the lease: machine, stack, budget, each item done (wall time,
                      figures, files) and each deferred or failed one with why
    records.tar.gz    the records of the items done (run records and figures), laid out
                      as in the store; `campaign.py merge` files them there
    lease.md          the same as lease.json, for a reader
    steps.log         each child's log (tail)

so a lease cut off returns what finished. An item's runs go through the project's own
entry points: (a) `python -m harness run --preset hardware --seeds S`, (b) and (d) the GPU
suite's steps (benchmarks/gpu_suite.py: our PPO, the reference, --deterministic twice),
(c) `cleanba.tools.speed_bound` in a measured child (benchmarks/measured_run.py), once per
actor mode. Chunk (b) runs our trainer in the actor mode a chunk (c) found faster (this
lease's, else the latest merged one's; campaign_state.trainer_mode), else serial.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign_state import (
    ACTOR_MODES,
    CPU_ESTIMATE_S,
    EQUIVALENCE,
    GPU_ESTIMATE_S,
    PRESET,
    RECORD_FILES,
    ROOT,
    TINY_ESTIMATE_S,
    Item,
    Place,
    estimate_s,
    faster_mode,
    plan_items,
    probe_place,
    read_place,
    sweep_run_ids,
    tool_kind,
    trainer_mode,
)
from gpu_suite import (
    FULL,
    TINY,
    WARMUP_UPDATES,
    SuiteConfig,
    append_logs,
    compare_checksums,
    ours,
    reference,
    run_child,
)

from cleanba.core.actor_clock import breakdown_text

# chunk (c)'s own together runs (their actor-step breakdowns, the modes' comparison): the
# two modes' runs together, each of TOGETHER_UPDATES. One mode's whole measurement took 79 s
# on the H200 (6 together updates), so the chunk's estimate plus this covers both modes.
GPU_TOGETHER_S, CPU_TOGETHER_S, TINY_TOGETHER_S = 80.0, 400.0, 60.0
# 6 (a window of 4 updates) rather than the tool's 8 so that both modes fit the cap that
# one mode had; tiny: the least the tool takes (a window of 2), to keep the rehearsal short
TOGETHER_UPDATES, TINY_TOGETHER_UPDATES = 6, 4
TINY_EQUIVALENCE_FRAMES = 4096  # CartPole frames per run with --tiny (4 updates of 8 x 128)
KILL_GRACE_S = 15.0  # a harness run gets SIGTERM this long before its cap (it stops its
# trainers, which record `interrupted`), then SIGKILL at the cap


@dataclass
class LeaseConfig:
    """One lease: continue the campaign on this machine (results/hardware/README.md)."""

    out: Path
    """Where lease.json, records.tar.gz, lease.md and steps.log go ($OUT on the device)."""
    budget_s: float = 470.0
    """Seconds for the items (run.sh passes what its 480 s leave after the kit's install)."""
    store: Path = ROOT / "results" / "hardware"
    """The committed store: what is done already (read only here)."""
    reference_path: Path | None = None
    """Checkout of vwxyzjn/cleanba (the kit's reference/): chunk (b) needs it."""
    chunks: str = ""
    """Which chunks to work on, in a, b, c, d (default: abcd on a GPU, a on a CPU: the
    CPU records chunk (a) compares with)."""
    seeds_per_round: int = 2
    """Chunk (a) seeds per round of the plan (about one round per lease)."""
    rounds: int = 8
    """Rounds of the plan a lease may reach (CPU records: one round of N seeds)."""
    tiny: bool = False
    """Small budgets (the CPU rehearsal): CartPole runs of 4,096 frames, the suite's tiny
    Breakout runs; records of a tiny lease have their own run ids and figures."""
    workdir: Path | None = None
    """Where the runs write; default: a new temporary folder."""


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def lease_id(kind: str) -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ") + f"-{kind}"


def run_capped(cmd: list[str], log: Path, cap_s: float, env: dict[str, str] | None = None,
               ) -> tuple[int, float, bool]:
    """Run `cmd` (its output to `log`), SIGTERM KILL_GRACE_S before `cap_s`, SIGKILL at it:
    (exit code, wall s, stopped at its cap)."""
    start = time.monotonic()
    grace = min(KILL_GRACE_S, cap_s / 4)
    with open(log, "a") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        stopped = False
        try:
            proc.wait(timeout=max(cap_s - grace, 1.0))
        except subprocess.TimeoutExpired:
            stopped = True
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return proc.returncode, time.monotonic() - start, stopped


def copy_record(src: Path, dst: Path) -> list[str]:
    """The run record's three files into `dst` (created); their names."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in RECORD_FILES:
        shutil.copy2(src / name, dst / name)
    return list(RECORD_FILES)


class Lease:
    """A lease in progress: its items' results, written to --out after each one."""

    def __init__(self, cfg: LeaseConfig, env: dict[str, Any], place: Place, workdir: Path,
                 expected: dict[int, set[str]]):
        self.cfg, self.env, self.place, self.workdir = cfg, env, place, workdir
        self.expected = expected  # chunk (a): seed -> its run ids
        self.staging = workdir / "records"
        self.staging.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.c_mode: tuple[str, str] | None = None  # chunk (c)'s faster mode, why
        self.facts: dict[str, Any] = {
            "lease": lease_id(place.kind), "kind": place.kind, "stack": place.stack,
            "tool_kind": tool_kind(place.kind), "started_at": utc_now(),
            "mode": "tiny" if cfg.tiny else "paper settings", "budget_s": cfg.budget_s,
            "environment": env, "plan": [], "done": [], "deferred": [], "failed": [],
        }

    @property
    def id(self) -> str:
        return str(self.facts["lease"])

    def left_s(self) -> float:
        return self.cfg.budget_s - (time.monotonic() - self.started)

    def save(self) -> None:
        """lease.json, lease.md and records.tar.gz, each replaced atomically."""
        self.facts["wall_s"] = round(time.monotonic() - self.started, 1)
        self.facts["saved_at"] = utc_now()
        text = json.dumps(self.facts, indent=2)
        (self.staging / "lease.json").write_text(text)
        out = self.cfg.out
        tmp = out / "records.tar.gz.tmp"
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(self.staging, arcname=".", recursive=True)
        os.replace(tmp, out / "records.tar.gz")
        for name, body in (("lease.json", text), ("lease.md", lease_markdown(self.facts))):
            (out / f"{name}.tmp").write_text(body)
            os.replace(out / f"{name}.tmp", out / name)


# --------------------------------------------------------------------------------------
# the items


def suite_config(cfg: LeaseConfig, seed: int, out: Path) -> SuiteConfig:
    return SuiteConfig(out=out, reference_path=cfg.reference_path, tiny=cfg.tiny, seed=seed)


def item_a(lease: Lease, seed: int, cap_s: float, accelerator: str) -> dict[str, Any]:
    """Chunk (a), one seed: the preset's runs of that seed through `harness run`."""
    root = lease.workdir / "a"
    cmd = [sys.executable, "-m", "harness", "run", "--preset", PRESET, "--results-root",
           str(root), "--seeds", str(seed), "--accelerator", accelerator, "--no-progress",
           "--max-parallel", "1"]
    if lease.cfg.tiny:
        cmd += ["--frames", str(TINY_EQUIVALENCE_FRAMES)]
    code, wall, stopped = run_capped(cmd, lease.workdir / f"a-seed-{seed}.log", cap_s)
    runs = root / EQUIVALENCE / "runs"
    files, done = [], []
    for d in sorted(runs.iterdir()) if runs.is_dir() else []:
        manifest = _manifest(d)
        if manifest.get("status") == "completed" and manifest.get("seed") == seed:
            dst = lease.staging / EQUIVALENCE / "runs" / d.name
            files += [f"{EQUIVALENCE}/runs/{d.name}/{n}" for n in copy_record(d, dst)]
            done.append({"run_id": d.name, "system": manifest["system"],
                         "wall_time_s": (manifest.get("summary") or {}).get("wall_time_s")})
    ok = {r["run_id"] for r in done} == lease.expected[seed]  # every run of the seed
    return {"ok": ok, "wall_s": wall, "files": files, "runs": done, "exit_code": code,
            "stopped_at_cap": stopped, "command": " ".join(cmd[1:])}


def _manifest(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def item_b(lease: Lease, seed: int, cap_s: float) -> dict[str, Any]:
    """Chunk (b), one seed: our PPO and the reference on Breakout at the suite's budget,
    in the suite's shares of the cap."""
    cfg = lease.cfg
    work = lease.workdir / f"b-seed-{seed}"
    suite = suite_config(cfg, seed, work)
    budget = TINY if cfg.tiny else FULL
    mode, why = trainer_mode(lease.place, lease.c_mode)
    started = time.monotonic()
    ours_cap = cap_s * 125 / 260
    mine = ours(suite, work, "ours-ppo", "cleanba.ppo", (*budget.ppo, "--actor-mode", mode),
                budget.ppo_batch, budget.ppo_updates, ours_cap)
    mine["actor_mode"], mine["actor_mode_why"] = mode, why
    frames = (mine.get("learning") or {}).get("frames")
    ref_cap = max(cap_s - (time.monotonic() - started), 1.0)
    theirs = reference(suite, work, budget, ref_cap, frames)
    wall = time.monotonic() - started
    folder = f"learning/seed-{seed}"
    files = [f"{folder}/ours/{n}" for n in copy_record(work / "ours-ppo" / "run",
                                                         lease.staging / folder / "ours")]
    scalars = work / "reference-ppo" / "scalars.jsonl"
    if scalars.exists():  # the reference's own log: a few kB (one line per scalar)
        shutil.copy2(scalars, lease.staging / folder / "reference-scalars.jsonl")
        files.append(f"{folder}/reference-scalars.jsonl")
    figures = {"seed": seed, "lease": lease.id, "ours": mine,
               "reference": theirs | {"source": reference_source(cfg.reference_path)},
               "warmup_updates": WARMUP_UPDATES}
    (lease.staging / folder / "figures.json").write_text(json.dumps(figures, indent=2))
    files.append(f"{folder}/figures.json")
    ok = mine.get("steady_sps") is not None and theirs.get("steady_sps") is not None
    return {"ok": ok, "wall_s": wall, "files": files, "figures": _brief(mine, theirs)}


def reference_source(reference_path: Path | None) -> str | None:
    """Where the kit's reference came from (its manifest's `reference`: the checkout's
    commit, or what --reference-note says of an export, which has no .git to ask)."""
    if reference_path is None:
        return None
    try:
        return str(json.loads((reference_path.parent / "manifest.json").read_text())
                   .get("reference") or "") or None
    except (OSError, ValueError, AttributeError):
        return None


def _brief(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    keys = ("steady_sps", "first_update_s", "device_peak_gb", "peak_rss_gb", "updates_done")
    modes = ("actor_mode", "actor_mode_why")
    return {"ours": {k: mine.get(k) for k in (*modes, *keys)} | {"learning": mine.get("learning")},
            "reference": {k: theirs.get(k) for k in keys} | {"learning": theirs.get("learning")}}


def speed_bound_spec(cfg: LeaseConfig, mode: str) -> dict[str, Any]:
    budget = TINY if cfg.tiny else FULL
    args = ("atari", "--env-id", "Breakout-v5", *budget.ppo, "--architecture", "cleanba",
            "--actor-device-ids", "0", "--learner-device-ids", "0", "--seed", "1",
            "--actor-mode", mode)
    return {"algorithm": "ppo", "trainer_args": list(args), "rollouts": 2 if cfg.tiny else 3,
            "updates": 2 if cfg.tiny else 3,
            "together_updates": TINY_TOGETHER_UPDATES if cfg.tiny else TOGETHER_UPDATES}


def mode_brief(figures: dict[str, Any]) -> dict[str, Any]:
    """What lease.json and lease.md show of one mode."""
    steps = {phase: (figures.get(phase) or {}).get("actor_step")
             for phase in ("actor_alone", "together")}
    return {"actor_alone_sps": (figures.get("actor_alone") or {}).get("sps"),
            "together_sps": (figures.get("together") or {}).get("sps"),
            **{k: figures.get(k) for k in ("bound_sps", "bound_by", "share")},
            "actor_step": {k: breakdown_text(v) for k, v in steps.items() if v}}


def item_c(lease: Lease, cap_s: float) -> dict[str, Any]:
    """Chunk (c): actor alone, learner alone and both together (cleanba.tools.speed_bound,
    a measured child per actor mode, each in its share of the cap), each with where an
    actor step's time goes and the learner's update time; then which mode is faster. The
    record's top level is the serial mode's (the report's table reads it, as before). Each
    share is the tool's own together run's: chunk (c) runs before chunk (b), which takes
    its faster mode."""
    started = time.monotonic()
    modes: dict[str, dict[str, Any]] = {}
    for i, mode in enumerate(ACTOR_MODES):
        left = cap_s - (time.monotonic() - started)
        spec = {"task": "speed-bound", "name": f"speed-bound-{mode}",
                "config": speed_bound_spec(lease.cfg, mode)}
        child, facts = run_child(spec, lease.workdir, max(left / (len(ACTOR_MODES) - i), 1.0))
        modes[mode] = {**child, "process": facts}
    faster, why = faster_mode({m: (f.get("together") or {}).get("sps") for m, f in modes.items()})
    serial = modes[ACTOR_MODES[0]]
    figures = {"lease": lease.id, **serial, "modes": modes, "faster_mode": faster,
               "faster_why": why}
    name = f"speed-bound/{lease.id}.json"
    (lease.staging / "speed-bound").mkdir(exist_ok=True)
    (lease.staging / name).write_text(json.dumps(figures, indent=2))
    ok = all(f.get("share") is not None for f in modes.values())
    if ok:  # a comparison cut short names no mode for chunk (b)
        lease.c_mode = (faster, why)
    return {"ok": ok, "wall_s": time.monotonic() - started, "files": [name] if ok else [],
            "figures": {"modes": {m: mode_brief(f) for m, f in modes.items()},
                        "faster_mode": faster, "faster_why": why}}


def item_d(lease: Lease, cap_s: float) -> dict[str, Any]:
    """Chunk (d): our PPO with --deterministic twice (the suite's step); run to run, the
    params checksums at every update (and the records: the report compares them)."""
    from gpu_suite import run_step

    work = lease.workdir / "d"
    suite = suite_config(lease.cfg, 1, work)
    started = time.monotonic()
    step = run_step("deterministic", suite, {"steps": {}}, work, cap_s)
    wall = time.monotonic() - started
    folder = f"deterministic/{lease.id}"
    files = []
    for i in (1, 2):
        src = work / f"deterministic-{i}" / "run"
        if (src / "manifest.json").exists():
            files += [f"{folder}/run-{i}/{n}" for n in copy_record(src, lease.staging / folder
                                                                    / f"run-{i}")]
    runs = step.get("runs", [])
    checksums = [r.get("checksums", []) for r in runs] + [[], []]
    figures = {"lease": lease.id, **compare_checksums(checksums[0], checksums[1]),
               "runs": runs}
    (lease.staging / folder / "figures.json").parent.mkdir(parents=True, exist_ok=True)
    (lease.staging / folder / "figures.json").write_text(json.dumps(figures, indent=2))
    files.append(f"{folder}/figures.json")
    ok = len(runs) == 2 and all(r.get("updates_done") == r.get("updates_planned") for r in runs)
    keep = ("updates_compared", "checksums_identical", "first_mismatch_update")
    return {"ok": ok, "wall_s": wall, "files": files, "figures": {k: figures[k] for k in keep}}


# --------------------------------------------------------------------------------------
# the lease


def probe(workdir: Path) -> dict[str, Any]:
    env, facts = run_child({"task": "environment", "name": "environment"}, workdir, 120.0)
    if not env:
        raise RuntimeError(f"the environment probe failed (exit {facts['exit_code']}): "
                           f"{(workdir / 'environment.log').read_text()[-2000:]}")
    return env


def default_chunks(env: dict[str, Any]) -> str:
    on_gpu = any(d.get("platform") != "cpu" for d in env.get("devices") or [])
    return "abcd" if on_gpu else "a"


def run_lease(cfg: LeaseConfig) -> dict[str, Any]:
    """The lease (module doc); returns its facts (also in --out)."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    workdir = cfg.workdir or Path(tempfile.mkdtemp(prefix="campaign-"))
    env = probe(workdir)
    kind, stack = probe_place(env)
    place = read_place(cfg.store, kind, stack)
    expected = sweep_run_ids(TINY_EQUIVALENCE_FRAMES if cfg.tiny else None)
    chunks = cfg.chunks or default_chunks(env)
    lease = Lease(cfg, env, place, workdir, expected)
    on_gpu = default_chunks(env) == "abcd"
    defaults = TINY_ESTIMATE_S if cfg.tiny else GPU_ESTIMATE_S if on_gpu else CPU_ESTIMATE_S
    estimates = {c: estimate_s(place, c, defaults) for c in "abcd"}
    items = plan_items(place, expected, chunks, cfg.seeds_per_round, cfg.rounds)
    lease.facts.update({"chunks": chunks, "estimates_s": estimates,
                        "plan": [i.name for i in items]})
    if "b" in chunks and cfg.reference_path is None:
        lease.facts["deferred"].append({"item": "b", "why": "no reference Cleanba in the "
                                        "kit (build it with --reference-path)"})
        items = [i for i in items if i.chunk != "b"]
    accelerator = "gpu" if on_gpu else "cpu"
    lease.save()
    for item in items:
        est, left = estimates[item.chunk], lease.left_s()
        if item.chunk == "c":  # each actor mode's together run (breakdown, comparison)
            est += (TINY_TOGETHER_S if cfg.tiny else GPU_TOGETHER_S if on_gpu else CPU_TOGETHER_S)
        if est > left:
            if len(lease.facts["deferred"]) < 20:
                lease.facts["deferred"].append({"item": item.name, "why": f"needs ~{est:.0f} s, "
                                                f"{left:.0f} s left"})
            continue
        cap = min(left, max(est * 1.3, est + 20.0))
        print(f"[campaign] {item.name} (cap {cap:.0f} s, {left:.0f} s left) ...", flush=True)
        before = set(workdir.rglob("*.log"))
        try:
            result = run_item(lease, item, cap, accelerator)
        except Exception as exc:  # noqa: BLE001 - a failed item is recorded, the next runs
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "wall_s": 0.0,
                      "files": []}
        entry = {"item": item.name, "chunk": item.chunk, "seed": item.seed,
                 "finished_at": utc_now(), **result}
        lease.facts["done" if result["ok"] else "failed"].append(entry)
        append_logs(cfg.out / "steps.log", item.name, sorted(set(workdir.rglob("*.log")) - before))
        lease.save()
        print(f"[campaign] {item.name}: {'done' if result['ok'] else 'FAILED'} in "
              f"{result['wall_s']:.0f} s", flush=True)
    lease.facts["finished_at"] = utc_now()
    lease.save()
    return lease.facts


def run_item(lease: Lease, item: Item, cap: float, accelerator: str) -> dict[str, Any]:
    if item.chunk == "a":
        assert item.seed is not None
        return item_a(lease, item.seed, cap, accelerator)
    if item.chunk == "b":
        assert item.seed is not None
        return item_b(lease, item.seed, cap)
    if item.chunk == "c":
        return item_c(lease, cap)
    return item_d(lease, cap)


def lease_markdown(facts: dict[str, Any]) -> str:
    """lease.json for a reader."""
    env = facts.get("environment") or {}
    lines = [f"# Campaign lease {facts['lease']}", "",
             f"- machine: {facts['kind']} (device tool kind: {facts.get('tool_kind') or '-'}), "
             f"CPU {env.get('cpu_model')}, {env.get('cpu_cores')} cores",
             f"- stack: {facts['stack']}; CUDA runtime {env.get('cuda_runtime', '-')}",
             f"- mode: {facts['mode']}; budget {facts['budget_s']:.0f} s; wall "
             f"{facts.get('wall_s', 0):.0f} s; chunks {facts.get('chunks', '')}",
             f"- plan (not done before this lease, in order): {', '.join(facts['plan'][:12])}"
             + (" ..." if len(facts["plan"]) > 12 else ""), "",
             "| item | status | wall s | figures |", "|---|---|---|---|"]
    for status in ("done", "failed"):
        for e in facts[status]:
            figures = json.dumps(e.get("figures") or e.get("runs") or e.get("error") or "")
            lines.append(f"| {e['item']} | {status} | {e['wall_s']:.0f} | {figures[:300]} |")
    for d in facts["deferred"]:
        lines.append(f"| {d['item']} | deferred | | {d['why']} |")
    return "\n".join(lines + mode_lines(facts)) + "\n"


def mode_lines(facts: dict[str, Any]) -> list[str]:
    """The actor modes: chunk (c)'s figures per mode and the faster one, and the mode each
    chunk (b) run used and why."""
    lines = []
    for e in facts["done"] + facts["failed"]:
        figures = e.get("figures") or {}
        if e.get("chunk") == "c" and "modes" in figures:
            lines.append(f"- {e['item']}: faster actor mode **{figures['faster_mode']}** "
                         f"({figures['faster_why']})")
            for mode, f in figures["modes"].items():
                lines.append(f"  - {mode}: actor alone {_sps(f['actor_alone_sps'])}, together "
                             f"{_sps(f['together_sps'])}, share {_ratio(f['share'])} of the "
                             f"bound {_sps(f['bound_sps'])} (set by the {f['bound_by'] or '?'})")
                for phase, text in f["actor_step"].items():
                    lines.append(f"    - actor step {phase.replace('_', ' ')}: {text}")
        if e.get("chunk") == "b" and (figures.get("ours") or {}).get("actor_mode"):
            ours_b = figures["ours"]
            lines.append(f"- {e['item']}: our trainer in actor mode **{ours_b['actor_mode']}** "
                         f"({ours_b['actor_mode_why']})")
    return ["", "## Actor modes", "", *lines] if lines else []


def _sps(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f} SPS"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def read_archive(path: Path) -> tuple[dict[str, Any], tarfile.TarFile]:
    """(lease.json, the open archive) of a lease's records.tar.gz (or of the folder that
    holds it)."""
    if path.is_dir():
        path = path / "records.tar.gz"
    tar = tarfile.open(path, "r:gz")
    member = tar.extractfile("./lease.json")
    if member is None:
        raise ValueError(f"{path}: no lease.json inside (not a campaign lease's records)")
    return json.load(io.TextIOWrapper(member, encoding="utf-8")), tar
