"""Benchmark: vectorised stratified bootstrap vs rliable 1.2.0, in the same process.

    python benchmarks/bench_analysis.py

Synthetic scores: `systems` x `runs` x `games` (5 x 3 x 57), and 50-point curves.
Times (time.perf_counter, after one warm-up call each):
- aggregates: median, IQM, mean, optimality gap with 95% CIs at `reps` (50,000) reps,
  all systems; rliable at the same reps;
- curve: 50-point IQM curve, all systems, at `reps`; rliable at `rliable_curve_reps`
  (2,000) and scaled linearly to `reps` (its cost is a Python loop per replicate);
- probability of improvement, one pair, at `reps`; rliable at `rliable_poi_reps` and
  scaled linearly;
- bca: the four aggregates with bias-corrected accelerated CIs (analysis.rly, its
  stratified jackknife included), all systems, at `reps`; rliable's method="bca" at
  `rliable_bca_reps` and scaled linearly.
Memory: tracemalloc peak of our computations (NumPy reports its buffers to tracemalloc)
and the process's peak RSS (resource.getrusage) before rliable is imported.
Also prints how far our CI endpoints are from rliable's, relative to the CI width.
rliable is imported here only (a dev/test-only dependency).
"""

from __future__ import annotations

import resource
import sys
import time
import tracemalloc
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Run as a script from anywhere: the project root goes first on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import rly as ours_rly  # noqa: E402
from analysis.stats.metrics import (  # noqa: E402  # noqa: E402  # noqa: E402
    AGGREGATES,
    interval_estimates,
    iqm,
    probability_of_improvement_ci,
)
from runrecord.cli_help import parse_config  # noqa: E402
from runrecord.provenance import cpu_model  # noqa: E402


@dataclass
class BenchConfig:
    """Sizes and reps of the benchmark."""

    systems: int = 5
    """Algorithms compared."""
    runs: int = 3
    """Runs (seeds) per game."""
    games: int = 57
    """Tasks."""
    points: int = 50
    """Points of the IQM curve."""
    reps: int = 50_000
    """Bootstrap reps of our implementation (and of rliable's aggregates)."""
    rliable_curve_reps: int = 2_000
    """rliable's reps for the curve (scaled linearly to `reps`)."""
    rliable_poi_reps: int = 200
    """rliable's reps for probability of improvement (scaled linearly to `reps`)."""
    rliable_bca_reps: int = 5_000
    """rliable's reps for the bca aggregates (scaled linearly to `reps`)."""
    seed: int = 0
    """Seed of the synthetic scores and of our bootstrap."""
    skip_rliable: bool = False
    """Only time our implementation."""


def synthetic_scores(cfg: BenchConfig) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """HNS-like scores: per-game difficulty x per-system skill, gamma noise across runs."""
    rng = np.random.default_rng(cfg.seed)
    difficulty = rng.lognormal(0.0, 1.0, cfg.games)
    finals, curves = {}, {}
    progress = 1 - np.exp(-4 * np.linspace(0.02, 1, cfg.points))
    for s in range(cfg.systems):
        skill = 0.6 + 0.15 * s
        final = difficulty * skill * rng.gamma(8.0, 1 / 8.0, (cfg.runs, cfg.games))
        finals[f"system{s}"] = final
        noise = rng.normal(1.0, 0.1, (cfg.runs, cfg.games, cfg.points))
        curves[f"system{s}"] = final[..., None] * progress * noise
    return finals, curves


def _time(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def run(cfg: BenchConfig) -> dict[str, float]:
    finals, curves = synthetic_scores(cfg)
    pair = ("system1", "system0")
    # 3 seeds per game on purpose (the project's design); the warning says so each call
    warnings.simplefilter("ignore", ours_rly.SeedWarning)
    # Warm-up: first calls pay one-off import/compile costs.
    interval_estimates(finals["system0"], AGGREGATES, reps=100, seed=cfg.seed)
    probability_of_improvement_ci(finals[pair[0]], finals[pair[1]], reps=100)

    tracemalloc.start()
    t_agg, ours_agg = _time(lambda: {
        k: interval_estimates(v, AGGREGATES, reps=cfg.reps, seed=cfg.seed)
        for k, v in finals.items()})
    t_curve, ours_curve = _time(lambda: {
        k: interval_estimates(v, {"iqm": iqm}, reps=cfg.reps, seed=cfg.seed)["iqm"]
        for k, v in curves.items()})
    t_poi, ours_poi = _time(lambda: probability_of_improvement_ci(
        finals[pair[0]], finals[pair[1]], reps=cfg.reps, seed=cfg.seed))
    t_bca, (_, ours_bca) = _time(lambda: ours_rly.get_interval_estimates(
        finals, _ours_aggregates, method="bca", reps=cfg.reps, random_state=cfg.seed))
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    traced_mb = traced_peak / 2**20

    print(f"synthetic: {cfg.systems} systems x {cfg.runs} runs x {cfg.games} games; "
          f"curve {cfg.points} points; {cfg.reps} reps; CPU: {_cpu()}")
    print(f"peak memory of our computations: {traced_mb:.1f} MB traced (tracemalloc), "
          f"process peak RSS before rliable: {rss_mb:.0f} MB (target < 500 MB)")
    out = {"ours_aggregates_s": t_agg, "ours_curve_s": t_curve, "ours_poi_s": t_poi,
           "ours_bca_s": t_bca, "traced_peak_mb": traced_mb, "rss_peak_mb": rss_mb}
    if cfg.skip_rliable:
        print(f"ours: aggregates {t_agg:.2f} s, curve {t_curve:.2f} s, P(X>Y) {t_poi:.3f} s, "
              f"bca aggregates {t_bca:.2f} s")
        return out

    # Imported here, after the peak RSS above is read: it must not count rliable.
    from rliable import library as rly
    from rliable import metrics as rm

    def agg_func(x):
        return np.array([rm.aggregate_median(x), rm.aggregate_iqm(x), rm.aggregate_mean(x),
                         rm.aggregate_optimality_gap(x)])

    def curve_func(x):
        return np.array([rm.aggregate_iqm(x[..., k]) for k in range(x.shape[-1])])

    np.random.seed(cfg.seed)  # rliable ignores random_state and uses the global RNG
    t_r_agg, (r_pts, r_cis) = _time(lambda: rly.get_interval_estimates(
        finals, agg_func, reps=cfg.reps))
    np.random.seed(cfg.seed)
    t_r_curve_small, (_, r_curve_cis) = _time(lambda: rly.get_interval_estimates(
        curves, curve_func, reps=cfg.rliable_curve_reps))
    t_r_curve = t_r_curve_small * cfg.reps / cfg.rliable_curve_reps
    np.random.seed(cfg.seed)
    t_r_poi_small, (_, r_poi_ci) = _time(lambda: rly.get_interval_estimates(
        {"p": (finals[pair[0]], finals[pair[1]])}, rm.probability_of_improvement,
        reps=cfg.rliable_poi_reps))
    t_r_poi = t_r_poi_small * cfg.reps / cfg.rliable_poi_reps
    np.random.seed(cfg.seed)
    t_r_bca_small, (_, r_bca_cis) = _time(lambda: rly.get_interval_estimates(
        finals, agg_func, method="bca", reps=cfg.rliable_bca_reps))
    t_r_bca = t_r_bca_small * cfg.reps / cfg.rliable_bca_reps

    rows = [
        ("aggregates (4 metrics, all systems)", t_agg, t_r_agg, f"{cfg.reps}", 40),
        (f"IQM curve ({cfg.points} points, all systems)", t_curve, t_r_curve,
         f"{cfg.rliable_curve_reps} x {cfg.reps // cfg.rliable_curve_reps}", 25),
        ("probability of improvement (1 pair)", t_poi, t_r_poi,
         f"{cfg.rliable_poi_reps} x {cfg.reps // cfg.rliable_poi_reps}", 1000),
        ("bca aggregates (4 metrics, all systems)", t_bca, t_r_bca,
         f"{cfg.rliable_bca_reps} x {cfg.reps // cfg.rliable_bca_reps}", 20),
    ]
    print(f"{'task':42s} {'ours (s)':>9s} {'rliable (s)':>12s} {'rliable reps':>14s} "
          f"{'speed-up':>9s} {'target':>7s}")
    for name, ours, theirs, how, target in rows:
        speed = theirs / ours
        print(f"{name:42s} {ours:9.3f} {theirs:12.2f} {how:>14s} {speed:8.0f}x "
              f"{'>=' + str(target) + 'x':>7s} {'ok' if speed >= target else 'MISSED'}")
    print("(rliable curve, P(X>Y) and bca times measured at fewer reps and scaled linearly: "
          "its cost is one Python call per replicate)")

    # Agreement: point estimates must match exactly; CI endpoints within Monte-Carlo error.
    worst_point = 0.0
    worst_ci = dict.fromkeys(AGGREGATES, 0.0)
    for k in finals:
        for i, m in enumerate(AGGREGATES):
            iv = ours_agg[k][m]
            worst_point = max(worst_point, abs(float(iv.point) - float(r_pts[k][i])))
            width = float(iv.high - iv.low)
            worst_ci[m] = max(worst_ci[m], abs(float(iv.low) - r_cis[k][0, i]) / width,
                              abs(float(iv.high) - r_cis[k][1, i]) / width)
    print(f"aggregates vs rliable: max |point diff| {worst_point:.2e}; max CI endpoint diff "
          "as a share of the CI width: "
          + ", ".join(f"{m} {v:.1%}" for m, v in worst_ci.items())
          + " (the median's bootstrap distribution is lumpy at 3 runs, so its percentiles "
          "can land on neighbouring atoms)")
    worst_curve = 0.0
    for k in curves:
        iv = ours_curve[k]
        width = iv.high - iv.low
        worst_curve = max(worst_curve, float(np.max(np.abs(iv.low - r_curve_cis[k][0]) / width)),
                          float(np.max(np.abs(iv.high - r_curve_cis[k][1]) / width)))
    print(f"IQM curve CI endpoints vs rliable ({cfg.rliable_curve_reps} reps): max diff "
          f"{worst_curve:.1%} of the CI width")
    lo, hi = (float(v) for v in np.ravel(r_poi_ci["p"]))
    p_lo, p_hi = float(ours_poi.low), float(ours_poi.high)
    off = max(abs(p_lo - lo), abs(p_hi - hi)) / (p_hi - p_lo)
    print(f"P(X>Y): ours {float(ours_poi.point):.4f} [{p_lo:.4f}, {p_hi:.4f}], rliable "
          f"[{lo:.4f}, {hi:.4f}] at {cfg.rliable_poi_reps} reps (endpoint diff {off:.1%} of "
          "the width)")
    # bca: the accelerations differ (docs/from-rliable.md: arch's jackknife deletes a run
    # from every game at once), so this is a difference of method, not Monte Carlo error
    worst_bca = max(float(np.max(np.abs(ours_bca[k] - r_bca_cis[k])
                                 / (ours_bca[k][1] - ours_bca[k][0]))) for k in finals)
    print(f"bca CI endpoints vs rliable's bca ({cfg.rliable_bca_reps} reps): max diff "
          f"{worst_bca:.1%} of the CI width (the accelerations differ: see "
          f"docs/from-rliable.md)")
    out.update({"rliable_aggregates_s": t_r_agg, "rliable_curve_s": t_r_curve,
                "rliable_poi_s": t_r_poi, "rliable_bca_s": t_r_bca})
    return out


def _ours_aggregates(x):
    """The four aggregates, batched over leading axes (analysis.rly's metrics)."""
    return np.stack([ours_rly.aggregate_median(x), ours_rly.aggregate_iqm(x),
                     ours_rly.aggregate_mean(x), ours_rly.aggregate_optimality_gap(x)], axis=-1)


def _cpu() -> str:
    return cpu_model()


def main(argv: list[str] | None = None) -> int:
    run(parse_config(BenchConfig, args=argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
