"""Figures of the kinds in the Cleanba paper, written as PNG and PDF.

Okabe-Ito hues, darkened where needed so that every colour has a contrast of at least
3:1 against white (WCAG 2 graphical objects), fonts >= 10 pt, legends outside the data
area, matplotlib's Agg backend (no display). Every function writes
`<out_dir>/<name>.png` and `.pdf` and returns a FigureInfo with a title and a caption
that says what is plotted and how (and the matplotlib Figure, for tests that measure it).

Ticks: a narrow range of long numbers (an Atari aggregate from -0.0345 to -0.0340) gets
matplotlib's default of up to nine ticks, whose labels then run into each other on a
panel a few inches wide; `few_ticks` keeps few ticks, labelled with only the decimals
their spacing needs. One seed: a bootstrap over one seed resamples the same run, so its
"interval" has zero width; a figure draws the seed's point and says so (ONE_SEED_NOTE)
rather than an empty bar or an invisible band.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator, ScalarFormatter  # noqa: E402

from analysis.output.marks import MARKERS, OKABE_ITO, interval_bar, line_with_band  # noqa: E402
from analysis.scoring.scores import Curve, GroupScores  # noqa: E402
from analysis.stats.metrics import AGGREGATE_LABELS, Interval, performance_profile, replicates  # noqa: E402
from analysis.verdicts.staleness import StalenessReport  # noqa: E402

ONE_SEED_NOTE = "1 seed: no interval"
# rliable's convention for Atari HNS performance profiles: tau in [0, 8].
HNS_TAU_MAX = 8.0
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
    figure: Any = field(default=None, repr=False, compare=False)  # closed; for measuring

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "title": self.title, "caption": self.caption,
                "png": self.png, "pdf": self.pdf}


def few_ticks(axis: Any, nbins: int = 5) -> None:
    """At most `nbins` + 1 ticks at round steps, labelled in plain decimals (no offset
    such as '+1e3' to add, no scientific notation for ordinary scores)."""
    axis.set_major_locator(MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10]))
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_powerlimits((-4, 5))
    axis.set_major_formatter(formatter)


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
    return FigureInfo(name, title, caption, str(png), str(pdf), fig)


def _legend_below(fig, handles: Sequence[Any], labels: Sequence[str],
                  where: str = "lower") -> None:
    """Legend under (or, where='upper', above) the axes, outside the data (needs
    layout='constrained'): long group labels and many groups never cover a curve. Use
    'upper' with fig.supxlabel, which constrained layout would put on top of the legend."""
    longest = max((len(lab) for lab in labels), default=0)
    ncol = 1 if longest > 40 else 2 if longest > 18 else 4
    fig.legend(handles, labels, loc=f"outside {where} center", ncol=min(ncol, len(labels)),
               frameon=False)


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


METRIC_DEFINITIONS = {
    "median": "median over tasks of the per-task mean over runs",
    "mean": "mean over tasks of the per-task mean over runs",
    "iqm": "interquartile mean of all runs x tasks pooled",
    "optimality_gap": "optimality gap (1 - mean of min(score, 1)) of all runs x tasks",
}
"""What each aggregate is, for captions (rliable's definitions: analysis.stats.metrics)."""


def coinciding(values: Mapping[str, Sequence[Any]]) -> list[list[str]]:
    """Metrics grouped by identical values (e.g. median, IQM and mean of a one-task suite
    at 3 seeds: one number), in order; each value a sequence of arrays or Intervals."""
    def same(a: Sequence[Any], b: Sequence[Any]) -> bool:
        return len(a) == len(b) and all(
            np.array_equal(np.asarray(getattr(x, k)), np.asarray(getattr(y, k)),
                           equal_nan=True) for x, y in zip(a, b, strict=True)
            for k in ("point", "low", "high"))
    groups: list[list[str]] = []
    for m, v in values.items():
        for g in groups:
            if same(values[g[0]], v):
                g.append(m)
                break
        else:
            groups.append([m])
    return groups


def _names(metrics: Sequence[str]) -> str:
    return " = ".join(AGGREGATE_LABELS.get(m, m) for m in metrics)


def efficiency_curves_figure(
    curves: Sequence[Curve], out_dir: Path, *, metric: str = "median",
    name: str | None = None, score_label: str = "normalised score",
    same_as: Sequence[str] = (),
) -> FigureInfo:
    """One line per group with its pointwise CI band (median or IQM vs frames/time).
    same_as: other metrics whose curves are identical here (one figure says so)."""
    axis = curves[0].axis
    with _style():
        fig, ax = plt.subplots(figsize=(6.4, 4.2 + 0.22 * len(curves)), layout="constrained")
        scale, xlabel = (_frames_label if axis == "frames" else _time_label)(curves[0].grid)
        for i, c in enumerate(curves):
            iv = c.metrics[metric]
            x = c.grid / scale
            one_seed = c.seeds == 1
            line_with_band(ax, x, iv.point, None if one_seed else (iv.low, iv.high), colour(i),
                           label=f"{c.group} ({ONE_SEED_NOTE})" if one_seed else c.group,
                           marker=MARKERS[i % len(MARKERS)], markevery=max(1, len(x) // 8))
        few_ticks(ax.yaxis)
        ax.set_xlabel(xlabel)
        label = _names([metric, *same_as])
        ax.set_ylabel(f"{label} {score_label}")
        _legend_below(fig, *ax.get_legend_handles_labels())
        what = "frames" if axis == "frames" else "wall-clock time"
        title = f"{label} {score_label} vs {what}"
        ax.set_title(title)
    defined = "; ".join(f"{AGGREGATE_LABELS.get(m, m)}: {METRIC_DEFINITIONS.get(m, m)}"
                        for m in (metric, *same_as))
    caption = (f"{label} of the {score_label} of episodes finishing in each bin, vs {what} "
               f"({defined}); shaded: pointwise 95% stratified bootstrap CI (no band for a "
               "group of one seed)."
               + (" Each line ends where its group's last run ended and, once a run has "
                  "ended, is the aggregate of the runs still going; the band stops where "
                  "the group's first run ended (past it, not every seed has data)."
                  if any(c.band_end is not None for c in curves) else "")
               + (" The curves of these aggregates are identical here (e.g. one task: its "
                  "median and mean over tasks are its mean, and at 3 or fewer seeds the IQM "
                  "trims nothing), so they are drawn once." if same_as else ""))
    return _save(fig, out_dir, name or f"{metric}_vs_{axis}", title, caption)


def aggregate_intervals_figure(
    results: Mapping[str, Mapping[str, Interval]], out_dir: Path, *, name: str = "aggregates",
    score_label: str = "normalised score", seeds: Mapping[str, int] | None = None,
) -> FigureInfo:
    """rliable-style interval plot: one panel per metric, one bar (CI) per group; a group
    of one seed (per `seeds`) has no interval: its point, marked and noted, instead."""
    groups = list(results)
    panels = coinciding({m: [results[g][m] for g in groups]
                         for m in next(iter(results.values()))})
    metrics = [p[0] for p in panels]
    # Two panels per row: a row of four is too wide to read at a page's width.
    ncols = min(2, len(metrics))
    nrows = math.ceil(len(metrics) / ncols)
    with _style():
        fig, axes = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                                 figsize=(4.6 * ncols, nrows * max(2.2, 0.5 * len(groups) + 1.2)
                                          + 0.4))
        for j in range(len(metrics), nrows * ncols):
            axes[j // ncols, j % ncols].axis("off")
        for k, m in enumerate(metrics):
            ax = axes[k // ncols, k % ncols]
            values, single = [], []
            for i, g in enumerate(groups):
                iv = results[g][m]
                lo, hi, pt = float(iv.low), float(iv.high), float(iv.point)
                if seeds is not None and seeds.get(g, 2) < 2:
                    single.append((i, pt))
                else:
                    interval_bar(ax, i, lo, hi, pt, colour(i))
                values += [lo, hi, pt]
            finite = [v for v in values if math.isfinite(v)]
            if finite:  # 6% of the span free each side (whole markers); no span: +-5%
                low, high = min(finite), max(finite)
                pad = 0.06 * (high - low) if high > low else (abs(high) * 0.05 or 0.05)
                ax.set_xlim(low - pad, high + pad)
            few_ticks(ax.xaxis)
            for i, pt in single:  # its point, and the note on the side with more room
                ax.plot([pt], [i], marker="D", ms=8, color=colour(i), markeredgecolor="black",
                        ls="none", zorder=3)
                lo, hi = sorted(ax.get_xlim())
                right = pt <= (lo + hi) / 2
                ax.annotate(ONE_SEED_NOTE, (pt, i), xytext=(8 if right else -8, 0),
                            textcoords="offset points", va="center",
                            ha="left" if right else "right", fontsize=9, color="#333")
            ax.set_yticks(range(len(groups)))
            ax.set_yticklabels(groups if k % ncols == 0 else [])
            ax.set_title(_names(panels[k]))
            ax.set_ylim(len(groups) - 0.5, -0.5)  # first group on top; room around markers
            ax.grid(axis="y", visible=False)
        fig.supxlabel(score_label)
    title = "Aggregate metrics with 95% CIs"
    caption = ("Median, IQM and mean (higher is better) and optimality gap (lower is better) "
               f"of the final {score_label} (mean of each run's last 100 episodes); bars are "
               "95% stratified bootstrap CIs, black ticks the point estimates (a group of one "
               f"seed has no interval: its point is a diamond, noted '{ONE_SEED_NOTE}')."
               + (" Aggregates that are the same numbers here (e.g. one task: its median and "
                  "mean are its mean, and at 3 or fewer seeds the IQM trims nothing) share a "
                  "panel."
                  if any(len(p) > 1 for p in panels) else ""))
    return _save(fig, out_dir, name, title, caption)


def per_game_curves_figure(
    groups: Mapping[str, GroupScores], out_dir: Path, *, name: str = "per_game_curves",
) -> FigureInfo:
    """Fig. 5 style: one panel per game, one line per group (mean over seeds, min-max band)."""
    first = next(iter(groups.values()))
    tasks = first.tasks
    ncols = min(len(tasks), 6)
    nrows = math.ceil(len(tasks) / ncols)
    scale, xlabel = _frames_label(first.frame_grid)
    # One game: one full-size panel (not a thumbnail under a legend wider than it).
    panel = (6.4, 4.2) if len(tasks) == 1 else (3.0, 2.5)
    with _style():
        fig, axes = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                                 figsize=(panel[0] * ncols,
                                          panel[1] * nrows + 0.8 + 0.22 * len(groups)))
        for j, task in enumerate(tasks):
            ax = axes[j // ncols, j % ncols]
            for i, (g, gs) in enumerate(groups.items()):
                if task not in gs.tasks:
                    continue
                c = gs.curves[:, gs.tasks.index(task)]
                line_with_band(ax, gs.frame_grid / scale, c.mean(axis=0),
                               (c.min(axis=0), c.max(axis=0)), colour(i), lw=1.8, label=g)
            ax.set_title(task)
        for j in range(len(tasks), nrows * ncols):
            axes[j // ncols, j % ncols].axis("off")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        _legend_below(fig, handles, labels, where="upper")
        fig.supxlabel(xlabel)
        fig.supylabel("normalised score")
    title = "Per-game learning curves across groups"
    caption = ("Normalised score of episodes finishing in each frame bin; line: mean over "
               "seeds, band: min to max over seeds. Overlapping lines across hardware layouts "
               "mean the layout did not change learning.")
    return _save(fig, out_dir, name, title, caption)


def needs_log_scale(values: np.ndarray, ratio: float = 20.0) -> bool:
    """True when the largest |value| exceeds `ratio` x the median |value| (one game
    would flatten every other bar on a linear axis)."""
    mags = np.abs(np.asarray(values, dtype=np.float64).ravel())
    mags = mags[np.isfinite(mags)]
    if len(mags) == 0:
        return False
    med = float(np.median(mags))
    return float(mags.max()) > ratio * max(med, 1e-9) and float(mags.max()) > 1.0


def paired_final_scores_figure(
    a: GroupScores, b: GroupScores, out_dir: Path, *, name: str = "sync_vs_cleanba",
    title: str | None = None,
) -> FigureInfo:
    """Two groups side by side per game (e.g. sync vs cleanba): mean final score, seed dots.
    Many games: one row per game (names stay readable); a wide range of scores (e.g.
    VideoPinball's HNS among 57 games): symmetric log axis, linear within +-1."""
    tasks = [t for t in a.tasks if t in b.tasks]
    vals = {gs.group: np.stack([gs.final[:, gs.tasks.index(t)] for t in tasks], axis=1)
            for gs in (a, b)}
    log = needs_log_scale(np.concatenate([v.ravel() for v in vals.values()]))
    horizontal = len(tasks) > 12
    with _style():
        size = ((6.4, 0.32 * len(tasks) + 1.8) if horizontal
                else (max(5.0, 0.6 * len(tasks) + 2), 4.4))
        fig, ax = plt.subplots(figsize=size, layout="constrained")
        width = 0.38
        for i, (gs, off) in enumerate(((a, -width / 2), (b, width / 2))):
            v = vals[gs.group]
            pos = np.arange(len(tasks)) + off
            bars = ax.barh if horizontal else ax.bar
            bars(pos, v.mean(axis=0), width, color=colour(i), alpha=0.8, label=gs.group)
            for s in range(v.shape[0]):
                dots = (v[s], pos) if horizontal else (pos, v[s])
                ax.plot(*dots, ls="none", marker="o", ms=3 if horizontal else 3.5,
                        color="black", alpha=0.6)
        label = "final normalised score" + (" (symmetric log scale)" if log else "")
        if horizontal:
            ax.set_yticks(range(len(tasks)))
            ax.set_yticklabels(tasks)
            ax.set_ylim(len(tasks) - 0.5, -0.5)
            ax.set_xlabel(label)
            ax.grid(axis="y", visible=False)
            if log:
                ax.set_xscale("symlog", linthresh=1.0)
        else:
            ax.set_xticks(range(len(tasks)))
            ax.set_xticklabels(tasks, rotation=45 if len(tasks) > 4 else 0,
                               ha="right" if len(tasks) > 4 else "center")
            ax.set_ylabel(label)
            ax.grid(axis="x", visible=False)
            if log:
                ax.set_yscale("symlog", linthresh=1.0)
        _legend_below(fig, *ax.get_legend_handles_labels())
        title = title or f"{a.group} vs {b.group}: final scores per game"
        ax.set_title(title)
    caption = ("Bars: mean over seeds of each run's final normalised score (last 100 "
               "episodes); dots: individual seeds."
               + (" Symmetric log axis (linear within +-1): the scores span more than 20x "
                  "their median." if log else ""))
    return _save(fig, out_dir, name, title, caption)


def runtime_bars_figure(
    labels: Sequence[str], minutes_mean: Sequence[float], minutes_err: Sequence[float] | None,
    out_dir: Path, *, name: str = "runtimes", what: str = "mean training time",
    error_what: str = "standard deviation over runs",
    reference: int | Sequence[int] | None = None,
) -> FigureInfo:
    """Horizontal bars of runtime per group/column, each labelled with its time and its
    ratio to the `reference` bar (default: the fastest; a sequence: each bar's own
    reference, e.g. its system's equivalence reference), the label right of the error bar.
    The axis label says what the error bars are."""
    minutes = np.asarray(minutes_mean, dtype=np.float64)
    err = (np.zeros_like(minutes) if minutes_err is None
           else np.nan_to_num(np.asarray(minutes_err, dtype=np.float64)))
    # The axis unit, its label suffix and its factor from minutes: seconds below 2 min,
    # minutes below 2 h, else hours.
    top = float(np.nanmax(minutes)) if len(minutes) else 1.0
    unit, suffix, k = (("seconds", "s", 60.0) if top < 2.0
                       else ("minutes", "min", 1.0) if top < 120.0 else ("hours", "h", 1 / 60))
    fastest = int(np.nanargmin(minutes)) if len(minutes) else 0
    refs = ([fastest if reference is None else int(reference)] * len(minutes)
            if reference is None or isinstance(reference, int) else list(reference))
    ref_names = sorted({labels[r] for r in refs}) if len(labels) else []
    ref_text = (f"{ref_names[0]} (the reference, "
                + ("the fastest bar)" if refs[0] == fastest else "1.00x)")
                if len(ref_names) == 1 else
                "its system's reference group (" + ", ".join(ref_names) + "; the group "
                "the equivalence verdicts compare with)") if ref_names else ""
    with _style():
        fig, ax = plt.subplots(figsize=(7.4, 0.5 * len(labels) + 1.6), layout="constrained")
        y = np.arange(len(labels))
        ax.barh(y, minutes * k, xerr=None if minutes_err is None else err * k,
                color=[colour(i) for i in range(len(labels))], alpha=0.85, capsize=3,
                error_kw={"lw": 1.2})
        ends = (minutes + err) * k
        right = float(np.nanmax(ends)) if len(ends) else 1.0
        for i, m in enumerate(minutes):
            base = float(minutes[refs[i]])
            ratio = m / base if base > 0 else math.nan
            tag = " (reference)" if i == refs[i] else f" ({ratio:.2f}x)"
            text = f"{m * k:.1f} {suffix}" if math.isfinite(m) else "n/a"
            ax.annotate(f"{text}{tag}", (float(ends[i]), i),
                        xytext=(6, 0), textcoords="offset points", va="center", fontsize=10)
        ax.set_yticks(y)
        ax.set_yticklabels(labels)
        ax.invert_yaxis()
        errors = "" if minutes_err is None else f"; error bars: {error_what}"
        ax.set_xlabel(f"{unit}{errors}")
        ax.set_xlim(0, right * 1.55 if right > 0 else 1)
        title = f"Runtime: {what}"
        ax.set_title(title)
        ax.grid(axis="y", visible=False)
    caption = f"{what}{errors}. Each label gives the time and its ratio to {ref_text}."
    return _save(fig, out_dir, name, title, caption)


def tau_range(score_label: str, top: float) -> tuple[float, float, str]:
    """(tau_min, tau_max, why) of a performance profile. HNS: [0, 8] as rliable does for
    Atari (linear), or [0, max(1, top)] when every score is below 8; other normalised
    scores (0 random, 1 the reference score): [0, max(1, top)]."""
    upper = max(1.0, top * 1.02)
    if score_label == "HNS" and upper > HNS_TAU_MAX:
        return 0.0, HNS_TAU_MAX, "tau from 0 to 8 HNS, linear (rliable's Atari convention)"
    return 0.0, upper, f"tau from 0 to {upper:.3g}, linear"


def performance_profile_figure(
    groups: Mapping[str, GroupScores], out_dir: Path, *, reps: int = 2000, seed: int = 0,
    name: str = "performance_profile", points: int = 101, score_label: str = "normalised score",
) -> FigureInfo:
    """Share of runs x tasks with final score > tau, with 95% bootstrap bands; tau range
    from tau_range."""
    top = max(float(np.max(g.final)) for g in groups.values())
    lo_tau, hi_tau, why = tau_range(score_label, top)
    taus = np.linspace(lo_tau, hi_tau, points)
    above = [float(np.mean(g.final > hi_tau)) for g in groups.values()]
    off_axis = 0  # one-seed runs scoring below tau_min: their diamond would sit on the wrong step
    with _style():
        fig, ax = plt.subplots(figsize=(6.4, 4.2 + 0.22 * len(groups)), layout="constrained")
        for i, (g, gs) in enumerate(groups.items()):
            one_seed = len(gs.seeds) < 2
            band = None if one_seed else np.percentile(
                replicates(gs.final, {"p": lambda x: performance_profile(x, taus)},
                           reps=reps, seed=seed)["p"], [2.5, 97.5], axis=0)
            # Markers staggered across groups, so equal curves still show every marker.
            every = max(2, points // 6)
            line_with_band(ax, taus, performance_profile(gs.final, taus), band, colour(i),
                           label=f"{g} ({ONE_SEED_NOTE}; diamonds: its runs)" if one_seed else g,
                           marker=MARKERS[i % len(MARKERS)],
                           markevery=((i * every) // max(1, len(groups)), every))
            if one_seed:  # each run's score at the top of its step: the data, not a band
                runs = np.sort(gs.final.ravel())
                shown = runs[runs >= lo_tau]
                off_axis += len(runs) - len(shown)
                ax.plot(np.minimum(shown, hi_tau), [np.mean(runs >= v) for v in shown],
                        ls="none", marker="D", ms=7, color=colour(i), markeredgecolor="black",
                        zorder=3)
        ax.set_xlabel(score_label + r" $\tau$")
        ax.set_ylabel(r"fraction of runs with score > $\tau$")
        ax.set_xlim(lo_tau - 0.01 * (hi_tau - lo_tau), hi_tau)  # whole markers at 0
        ax.set_ylim(-0.02, 1.02)
        _legend_below(fig, *ax.get_legend_handles_labels())
        title = "Performance profile"
        ax.set_title(title)
    beyond = (f" {max(above):.0%} of a group's runs x tasks score above {hi_tau:g}."
              if max(above) > 0 else "")
    if off_axis:
        beyond += (f" {off_axis} run x task score{'s' if off_axis > 1 else ''} of a one-seed "
                   f"group below {lo_tau:g} (below random) left of the axis: no diamond.")
    caption = (f"Run-score distribution of final {score_label}s over all runs x tasks; "
               f"{why}; bands: 95% stratified bootstrap CIs ({reps} reps; a group of one "
               f"seed has none: its runs' scores are diamonds).{beyond}")
    return _save(fig, out_dir, name, title, caption)


def staleness_figure(report: StalenessReport, out_dir: Path) -> FigureInfo:
    """Histogram of worst-case staleness per group (share of updates)."""
    groups = report.groups
    values = sorted({int(k) for g in groups.values() for k in g["histogram"]}) or [0]
    with _style():
        fig, ax = plt.subplots(figsize=(6.4, 4.0 + 0.22 * len(groups)), layout="constrained")
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
        handles, labels = ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=1, frameon=False)
        title = f"Policy staleness ({report.verdict})"
        ax.set_title(title)
    caption = ("Share of learner updates by staleness of the oldest policy version in their "
               "batch. cleanba: 0 at the first update, 1 after; sync: always 0; async: varies. "
               + report.line())
    return _save(fig, out_dir, "staleness", title, caption)


def reproduce_scatter_figure(points: Mapping[str, Any], out_dir: Path, *, column: str,
                             budget: str = "") -> FigureInfo:
    """Per game: your mean HNS (y) against the published one (x), sd error bars both ways,
    the diagonal y = x, on a symmetric-log scale (linear within +-1 HNS, logarithmic
    beyond) so 57 games from -0.1 to 300+ HNS stay readable. Colour and marker give the
    verdict; games flagged HIGHER/LOWER, and the three furthest from the diagonal, are
    labelled."""
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
        top = set(np.argsort(-dist)[:3].tolist())
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
    return _save(fig, out_dir, "reproduce_per_game", title, caption)
