"""Figures of the kinds in the Cleanba paper, written as PNG and PDF.

Okabe-Ito colour-blind-safe palette, fonts >= 10 pt, matplotlib's Agg backend (no
display). Every function writes `<out_dir>/<name>.png` and `.pdf` and returns a
FigureInfo with a title and a caption that says what is plotted and how.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from analysis.bootstrap import Interval, replicates  # noqa: E402
from analysis.curves import Curve  # noqa: E402
from analysis.metrics import AGGREGATE_LABELS, performance_profile  # noqa: E402
from analysis.scores import GroupScores  # noqa: E402
from analysis.staleness import StalenessReport  # noqa: E402

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
STYLE = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.fontsize": 10,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "savefig.dpi": 150,
    "pdf.fonttype": 42,  # embed TrueType: text stays text in the PDF
}


@dataclass
class FigureInfo:
    name: str
    title: str
    caption: str
    png: str
    pdf: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _style():
    """Context manager applying STYLE (typed loosely: matplotlib's stubs want literal keys)."""
    return plt.rc_context(cast(Any, STYLE))


def colour(i: int) -> str:
    return OKABE_ITO[i % len(OKABE_ITO)]


def _save(fig, out_dir: Path, name: str, title: str, caption: str) -> FigureInfo:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    png, pdf = out_dir / f"{name}.png", out_dir / f"{name}.pdf"
    fig.savefig(png, bbox_inches="tight")
    fig.savefig(pdf, bbox_inches="tight")
    plt.close(fig)
    return FigureInfo(name, title, caption, str(png), str(pdf))


def _frames_label(grid: np.ndarray) -> tuple[float, str]:
    top = float(np.nanmax(grid)) if len(grid) else 1.0
    for scale, unit in ((1e9, "billions"), (1e6, "millions"), (1e3, "thousands")):
        if top >= scale:
            return scale, f"frames ({unit})"
    return 1.0, "frames"


def _time_label(grid: np.ndarray) -> tuple[float, str]:
    top = float(np.nanmax(grid)) if len(grid) else 1.0
    if top >= 3 * 3600:
        return 3600.0, "wall time (hours)"
    if top >= 180:
        return 60.0, "wall time (minutes)"
    return 1.0, "wall time (seconds)"


def efficiency_curves_figure(
    curves: Sequence[Curve], out_dir: Path, *, metric: str = "median",
    name: str | None = None, score_label: str = "normalised score",
) -> FigureInfo:
    """One line per group with its pointwise CI band (median or IQM vs frames/time)."""
    axis = curves[0].axis
    with _style():
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        scale, xlabel = (_frames_label if axis == "frames" else _time_label)(curves[0].grid)
        for i, c in enumerate(curves):
            iv = c.metrics[metric]
            x = c.grid / scale
            ax.plot(x, iv.point, color=colour(i), lw=2, label=c.group,
                    marker=MARKERS[i % len(MARKERS)], markevery=max(1, len(x) // 8))
            ax.fill_between(x, iv.low, iv.high, color=colour(i), alpha=0.2, lw=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{AGGREGATE_LABELS[metric]} {score_label}")
        ax.legend(frameon=False, loc="best")
        what = "frames" if axis == "frames" else "wall-clock time"
        title = f"{AGGREGATE_LABELS[metric]} {score_label} vs {what}"
        ax.set_title(title)
    caption = (f"{AGGREGATE_LABELS[metric]} over runs x tasks of the {score_label} of episodes "
               f"finishing in each bin, vs {what}; shaded: pointwise 95% stratified bootstrap "
               "CI.")
    return _save(fig, out_dir, name or f"{metric}_vs_{axis}", title, caption)


def aggregate_intervals_figure(
    results: Mapping[str, Mapping[str, Interval]], out_dir: Path, *, name: str = "aggregates",
    score_label: str = "normalised score",
) -> FigureInfo:
    """rliable-style interval plot: one panel per metric, one bar (CI) per group."""
    groups = list(results)
    metrics = list(next(iter(results.values())))
    with _style():
        fig, axes = plt.subplots(1, len(metrics), figsize=(3.0 * len(metrics),
                                                          max(2.6, 0.55 * len(groups) + 1.6)),
                                 squeeze=False)
        for k, m in enumerate(metrics):
            ax = axes[0, k]
            for i, g in enumerate(groups):
                iv = results[g][m]
                ax.barh(i, float(iv.high) - float(iv.low), left=float(iv.low), height=0.6,
                        color=colour(i), alpha=0.75)
                ax.vlines(float(iv.point), i - 0.3, i + 0.3, color="black", lw=2)
            ax.set_yticks(range(len(groups)))
            ax.set_yticklabels(groups if k == 0 else [])
            ax.set_title(AGGREGATE_LABELS.get(m, m))
            ax.invert_yaxis()
            ax.grid(axis="y", visible=False)
        fig.supxlabel(score_label)
    title = "Aggregate metrics with 95% CIs"
    caption = ("Median, IQM and mean (higher is better) and optimality gap (lower is better) "
               f"of the final {score_label} (mean of each run's last 100 episodes); bars are "
               "95% stratified bootstrap CIs, black ticks the point estimates.")
    return _save(fig, out_dir, name, title, caption)


def per_game_curves_figure(
    groups: Mapping[str, GroupScores], out_dir: Path, *, name: str = "per_game_curves",
    max_games: int = 60,
) -> FigureInfo:
    """Fig. 5 style: one panel per game, one line per group (mean over seeds, min-max band)."""
    first = next(iter(groups.values()))
    tasks = first.tasks[:max_games]
    ncols = min(len(tasks), 6)
    nrows = math.ceil(len(tasks) / ncols)
    scale, xlabel = _frames_label(first.frame_grid)
    with _style():
        fig, axes = plt.subplots(nrows, ncols, figsize=(3.0 * ncols, 2.5 * nrows + 0.8),
                                 squeeze=False, layout="constrained")
        for j, task in enumerate(tasks):
            ax = axes[j // ncols, j % ncols]
            for i, (g, gs) in enumerate(groups.items()):
                if task not in gs.tasks:
                    continue
                c = gs.curves[:, gs.tasks.index(task)]
                x = gs.frame_grid / scale
                ax.plot(x, c.mean(axis=0), color=colour(i), lw=1.8, label=g)
                ax.fill_between(x, c.min(axis=0), c.max(axis=0), color=colour(i), alpha=0.2,
                                lw=0)
            ax.set_title(task)
        for j in range(len(tasks), nrows * ncols):
            axes[j // ncols, j % ncols].axis("off")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside upper center", ncol=min(len(labels), 4),
                   frameon=False)
        fig.supxlabel(xlabel)
        fig.supylabel("normalised score")
    title = "Per-game learning curves across groups"
    caption = ("Normalised score of episodes finishing in each frame bin; line: mean over "
               "seeds, band: min to max over seeds. Overlapping lines across hardware layouts "
               "mean the layout did not change learning.")
    return _save(fig, out_dir, name, title, caption)


def paired_final_scores_figure(
    a: GroupScores, b: GroupScores, out_dir: Path, *, name: str = "sync_vs_cleanba",
    title: str | None = None,
) -> FigureInfo:
    """Two groups side by side per game (e.g. sync vs cleanba): mean final score, seed dots."""
    tasks = [t for t in a.tasks if t in b.tasks]
    with _style():
        fig, ax = plt.subplots(figsize=(max(5.0, 0.5 * len(tasks) + 2), 4.2))
        width = 0.38
        for i, (gs, off) in enumerate(((a, -width / 2), (b, width / 2))):
            vals = np.stack([gs.final[:, gs.tasks.index(t)] for t in tasks], axis=1)
            x = np.arange(len(tasks)) + off
            ax.bar(x, vals.mean(axis=0), width, color=colour(i), alpha=0.8, label=gs.group)
            for s in range(vals.shape[0]):
                ax.plot(x, vals[s], ls="none", marker="o", ms=3.5, color="black", alpha=0.6)
        ax.set_xticks(range(len(tasks)))
        ax.set_xticklabels(tasks, rotation=60 if len(tasks) > 4 else 0, ha="right"
                           if len(tasks) > 4 else "center")
        ax.set_ylabel("final normalised score")
        top = max(float(np.max(a.final)), float(np.max(b.final)), 0.0)
        ax.set_ylim(top=top * 1.4 if top > 0 else None)
        ax.legend(frameon=False, loc="upper left")
        title = title or f"{a.group} vs {b.group}: final scores per game"
        ax.set_title(title)
    caption = ("Bars: mean over seeds of each run's final normalised score (last 100 "
               "episodes); dots: individual seeds.")
    return _save(fig, out_dir, name, title, caption)


def runtime_bars_figure(
    labels: Sequence[str], minutes_mean: Sequence[float], minutes_err: Sequence[float] | None,
    out_dir: Path, *, name: str = "runtimes", what: str = "mean training time",
) -> FigureInfo:
    """Horizontal bars of runtime per group/column in minutes, with ratio labels."""
    minutes = np.asarray(minutes_mean, dtype=np.float64)
    with _style():
        fig, ax = plt.subplots(figsize=(6.4, 0.5 * len(labels) + 1.5))
        y = np.arange(len(labels))
        ax.barh(y, minutes, xerr=None if minutes_err is None else minutes_err,
                color=[colour(i) for i in range(len(labels))], alpha=0.85, capsize=3)
        fastest = float(np.nanmin(minutes)) if len(minutes) else 1.0
        for i, m in enumerate(minutes):
            ax.text(m, i, f"  {m:.1f} min ({m / fastest:.2f}x)", va="center", fontsize=10)
        ax.set_yticks(y)
        ax.set_yticklabels(labels)
        ax.invert_yaxis()
        ax.set_xlabel("minutes")
        ax.set_xlim(0, float(np.nanmax(minutes)) * 1.45 if len(minutes) else 1)
        title = f"Runtime: {what}"
        ax.set_title(title)
        ax.grid(axis="y", visible=False)
    caption = (f"{what} in minutes (error bars: standard deviation over runs where given); the "
               "ratio is to the fastest bar.")
    return _save(fig, out_dir, name, title, caption)


def performance_profile_figure(
    groups: Mapping[str, GroupScores], out_dir: Path, *, reps: int = 2000, seed: int = 0,
    name: str = "performance_profile", points: int = 101, score_label: str = "normalised score",
) -> FigureInfo:
    """Share of runs x tasks with final score > tau, with 95% bootstrap bands."""
    top = max(float(np.max(g.final)) for g in groups.values())
    taus = np.linspace(0.0, max(top, 1.0) * 1.02, points)
    with _style():
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for i, (g, gs) in enumerate(groups.items()):
            point = performance_profile(gs.final, taus)
            reps_v = replicates(gs.final, {"p": lambda x: performance_profile(x, taus)},
                                reps=reps, seed=seed)["p"]
            lo, hi = np.percentile(reps_v, [2.5, 97.5], axis=0)
            ax.plot(taus, point, color=colour(i), lw=2, label=g)
            ax.fill_between(taus, lo, hi, color=colour(i), alpha=0.2, lw=0)
        ax.set_xlabel(score_label + r" $\tau$")
        ax.set_ylabel(r"fraction of runs with score > $\tau$")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(frameon=False)
        title = "Performance profile"
        ax.set_title(title)
    caption = (f"Run-score distribution of final {score_label}s over all runs x tasks; "
               f"bands: 95% stratified bootstrap CIs ({reps} reps).")
    return _save(fig, out_dir, name, title, caption)


def staleness_figure(report: StalenessReport, out_dir: Path, *,
                     name: str = "staleness") -> FigureInfo:
    """Histogram of worst-case staleness per group (share of updates)."""
    groups = report.groups
    values = sorted({int(k) for g in groups.values() for k in g["histogram"]}) or [0]
    with _style():
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        width = 0.8 / max(1, len(groups))
        for i, (g, d) in enumerate(groups.items()):
            total = max(1, sum(d["histogram"].values()))
            share = [d["histogram"].get(v, 0) / total for v in values]
            mid = d["mid_rollout_share"]
            label = f"{g} (mid-rollout changes: " + (
                "n/a" if math.isnan(mid) else f"{mid:.1%}") + ")"
            ax.bar(np.arange(len(values)) + (i - (len(groups) - 1) / 2) * width, share, width,
                   color=colour(i), label=label)
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels([str(v) for v in values])
        ax.set_xlabel("staleness (learner version - 1 - oldest rollout version)")
        ax.set_ylabel("share of updates")
        ax.set_ylim(0, 1.05)
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1)
        title = f"Policy staleness ({report.verdict})"
        ax.set_title(title)
    caption = ("Share of learner updates by staleness of the oldest policy version in their "
               "batch. cleanba: 0 at the first update, 1 after; sync: always 0; async: varies. "
               + report.line())
    return _save(fig, out_dir, name, title, caption)


def reproduce_scatter_figure(points: Mapping[str, Any], out_dir: Path, *, column: str,
                             budget: str = "", name: str = "reproduce_per_game",
                             label_top: int = 3) -> FigureInfo:
    """Per game: your mean HNS (y) against the published one (x), sd error bars both ways,
    the diagonal y = x, on a symmetric-log scale (linear within +-1 HNS, logarithmic
    beyond) so 57 games from -0.1 to 300+ HNS stay readable. Colour and marker give the
    verdict; games flagged HIGHER/LOWER, and the `label_top` furthest from the diagonal,
    are labelled."""
    x, y = np.asarray(points["published"]), np.asarray(points["user"])
    xs, ys = np.asarray(points["published_sd"]), np.asarray(points["user_sd"])
    verdicts = list(points["verdicts"])
    styles = {"CONSISTENT": (colour(2), "o"), "INCONCLUSIVE": (colour(1), "s"),
              "LOWER": (colour(3), "v"), "HIGHER": (colour(0), "^")}
    with _style():
        fig, ax = plt.subplots(figsize=(7, 6.5))
        for v, (c, m) in styles.items():
            sel = np.array([w == v for w in verdicts])
            if sel.any():
                ax.errorbar(x[sel], y[sel], xerr=xs[sel], yerr=ys[sel], fmt=m, color=c,
                            ms=6, capsize=2, lw=1, label=f"{v.lower()} ({int(sel.sum())})")
        lo = float(min(np.min(x - xs), np.min(y - ys), 0.0))
        hi = float(max(np.max(x + xs), np.max(y + ys), 1.0))
        ax.plot([lo, hi], [lo, hi], color="#555", lw=1, ls="--", label="yours = published")
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_yscale("symlog", linthresh=1.0)
        dist = np.abs(np.arcsinh(y) - np.arcsinh(x))
        top = set(np.argsort(-dist)[:label_top].tolist())
        for i, g in enumerate(points["games"]):
            if verdicts[i] in ("HIGHER", "LOWER") or i in top:
                ax.annotate(str(g).removesuffix("-v5"), (x[i], y[i]), fontsize=10,
                            xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel(f"published HNS ({column})")
        ax.set_ylabel("your HNS (mean over your seeds)")
        ax.legend(loc="upper left")
        title = f"Yours vs published, per game{budget}"
        ax.set_title(title)
    caption = ("Each point is a game: the mean over seeds of the final score (mean of the "
               "last 100 episodes) as HNS, yours against the published table's; bars are "
               "one sd over seeds (published: the table's std converted to ddof=1). Points "
               "on the dashed diagonal reproduce exactly. Axes are symmetric-log (linear "
               "within +-1 HNS). Colour: the per-game verdict.")
    return _save(fig, out_dir, name, title, caption)
