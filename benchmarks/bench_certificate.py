"""Benchmark: `harness certify` and `harness verify` tier 1 on a 1,000-run sweep.

    python benchmarks/bench_certificate.py                 # 1,000 runs (about 5 minutes)
    python benchmarks/bench_certificate.py --seeds 2       # 200 runs
    python benchmarks/bench_certificate.py --workdir /tmp/c --keep

A sweep file of 2 systems x 5 layouts x 10 Atari games (the Atari-5 among them) x 10
seeds, and a synthetic record (tests/synthetic_records.py, through runrecord.RunWriter: 300
episodes, 40 updates) at each run's place in the store. Then, each in this process and
timed: certify (hash every file, run the report's claims: summary, aggregates with 20,000
bootstrap replicates, equivalence, staleness, Atari-5), verify tier 1 (hash every file
again, root, plan, every claim recomputed). Prints the certificate's size (bytes, and
gzipped) and the machine's load.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from synthetic_records import write_synthetic_run  # noqa: E402

from harness.cli import main as harness_main  # noqa: E402
from harness.sweep import load_sweep  # noqa: E402
from runrecord.cli_help import parse_config  # noqa: E402

GAMES = ["BattleZone-v5", "DoubleDunk-v5", "NameThisGame-v5", "Phoenix-v5", "Qbert-v5",
         "Breakout-v5", "Pong-v5", "Seaquest-v5", "SpaceInvaders-v5", "Asterix-v5"]
LAYOUTS = ["a0-l0-d1", "a0-l1-d1", "a0-l0,1-d1", "a0,1-l2,3-d1", "a0-l0-d2"]


@dataclass
class BenchConfig:
    seeds: int = 10
    """Seeds per (system, layout, game): runs = 100 x seeds."""
    episodes: int = 300
    """Episodes per run."""
    workdir: Path | None = None
    """Where the store goes (default: a temp folder, deleted afterwards)."""
    keep: bool = False
    """Keep the store and the certificate."""


def sweep_text(seeds: int) -> str:
    quoted = ", ".join(f'"{g}"' for g in GAMES)
    layouts = ", ".join(f'"{x}"' for x in LAYOUTS)
    return f"""name = "bench-certificate"
seeds = {list(range(1, seeds + 1))}
[report]
group_by = "layout.name"
reps = 2000
seed = 0
[[matrix]]
systems = ["cleanba-ppo", "cleanba-impala"]
architectures = ["cleanba"]
layouts = [{layouts}]
games = [{quoted}]
frames = 100_000
"""


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(argv: list[str]) -> tuple[int, str, str]:
    """Exit code, "<wall> s wall, <cpu> s CPU" (this process: certify and tier 1 start no
    other) and the output of one harness command run in this process."""
    out = io.StringIO()
    t0, c0 = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out):
        code = harness_main(argv)
    took = f"{time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU"
    return code, took, out.getvalue()


def main(cfg: BenchConfig) -> int:
    work = cfg.workdir or Path(tempfile.mkdtemp(prefix="bench-cert-"))
    work.mkdir(parents=True, exist_ok=True)
    sweep_file = work / "bench.toml"
    sweep_file.write_text(sweep_text(cfg.seeds))
    sweep = load_sweep(sweep_file)
    root = work / "results"
    runs_dir = root / sweep.name / "runs"
    t0 = time.perf_counter()
    for s in sweep.runs:
        if not (runs_dir / s.run_id / "manifest.json").exists():
            write_synthetic_run(root, system=s.system, env_id=s.env_id, seed=s.seed,
                                layout=s.layout.name, sweep=sweep.name, episodes=cfg.episodes,
                                total_frames=s.frames, run_dir=runs_dir / s.run_id,
                                skill=0.5 + 0.05 * (s.system == "cleanba-ppo"))
    files = sum(1 for _ in runs_dir.rglob("*") if _.is_file())
    size = sum(p.stat().st_size for p in runs_dir.rglob("*") if p.is_file())
    print(f"store: {len(sweep.runs)} runs, {files} files, {size / 1e6:.1f} MB, written in "
          f"{time.perf_counter() - t0:.1f} s (load {load()})")
    cert = work / "bench.cert.json"
    print(f"load before certify: {load()}")
    code, secs, out = timed(["certify", "--sweep", str(sweep_file), "--results-root",
                             str(root), "--out", str(cert)])
    if code != 0:
        print(out)
        return code
    data = cert.read_bytes()
    print(f"certify: {secs} (exit {code}); certificate {len(data):,} bytes, "
          f"{len(gzip.compress(data)):,} gzipped")
    for line in out.splitlines():
        if line.startswith(("claim ", "left out", "bound", "root")):
            print(f"  {line}")
    print(f"load before verify: {load()}")
    code, secs, out = timed(["verify", str(cert)])
    tier1 = next((x for x in out.splitlines() if x.startswith("tier 1:")), "")
    print(f"verify tier 1: {secs} (exit {code}; {tier1})")
    print(f"load after: {load()}")
    if not cfg.keep and cfg.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main(parse_config(BenchConfig)))
