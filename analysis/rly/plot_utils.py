"""rliable's `plot_utils` helpers that papers call, with their signatures, on matplotlib
alone (no seaborn). pyplot is imported on first call and the user's backend is kept.

color_palette: 'colorblind' (rliable's default name) gives the project's Okabe-Ito
palette; any matplotlib colormap name or a list of colours also works.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.output.marks import OKABE_ITO, interval_bar, line_with_band


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def palette_colors(keys: Sequence[str], color_palette: Any = "colorblind") -> dict[str, Any]:
    """One colour per key from a palette name or a list of colours (cycled)."""
    keys = list(keys)
    if isinstance(color_palette, str):
        if color_palette == "colorblind":
            colours: Sequence[Any] = OKABE_ITO
        else:
            import matplotlib

            try:
                cmap = matplotlib.colormaps[color_palette]
            except KeyError:
                raise AnalysisError(f"unknown color_palette {color_palette!r}; give "
                                    f"'colorblind', a matplotlib colormap name or a list "
                                    f"of colours") from None
            n = getattr(cmap, "N", 256)
            colours = ([cmap(i) for i in range(n)] if n <= 20 else
                       [cmap(x) for x in np.linspace(0, 1, max(1, len(keys)))])
    else:
        colours = list(color_palette)
    if not colours:
        raise AnalysisError("color_palette has no colours")
    return {k: colours[i % len(colours)] for i, k in enumerate(keys)}


def _decorate(ax, *, xlabel: str = "", ylabel: str = "", labelsize: Any = "x-large",
              ticklabelsize: Any = "x-large", xticks=None, yticks=None, xticklabels=None,
              legend: bool = False, grid_alpha: float = 0.2, legendsize: Any = "x-large",
              **_: Any):
    """Labels, ticks and a light grid, leaving only the left and bottom spines
    (the keywords rliable's _annotate_and_decorate_axis takes)."""
    ax.set_xlabel(xlabel, fontsize=labelsize)
    ax.set_ylabel(ylabel, fontsize=labelsize)
    if xticks is not None:
        ax.set_xticks(xticks)
        if xticklabels is not None:
            ax.set_xticklabels(xticklabels)
    if yticks is not None:
        ax.set_yticks(yticks)
    ax.grid(True, alpha=grid_alpha)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=ticklabelsize)
    if legend:
        ax.legend(fontsize=legendsize)
    return ax


def plot_probability_of_improvement(probability_estimates: Mapping[str, Any],
                                    probability_interval_estimates: Mapping[str, Any],
                                    pair_separator: str = ",",
                                    ax=None,
                                    figsize: tuple[float, float] = (4, 3),
                                    colors: Sequence[Any] | None = None,
                                    color_palette: Any = "colorblind",
                                    alpha: float = 0.75,
                                    xticks: Sequence[float] | None = None,
                                    xlabel: str = "P(X > Y)",
                                    left_ylabel: str = "Algorithm X",
                                    right_ylabel: str = "Algorithm Y",
                                    **kwargs: Any):
    """One bar per pair 'X<sep>Y': the CI of P(X > Y) as a bar, its estimate as a tick,
    X named on the left axis and Y on the right. `colors` is a list, one per pair (as
    rliable's). Returns ax."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    pairs = list(probability_estimates)
    bad = [p for p in pairs if len(p.split(pair_separator)) != 2]
    if bad:
        raise AnalysisError(f"pair names must read 'X{pair_separator}Y'; got {bad}")
    if not colors:
        colors = list(palette_colors(pairs, color_palette).values())
    height = kwargs.pop("interval_height", 0.6)
    kwargs.pop("wrect", None)
    ticklabelsize = kwargs.pop("ticklabelsize", "x-large")
    labelsize = kwargs.pop("labelsize", "x-large")
    ylabel_x = kwargs.pop("ylabel_x_coordinate", 0.2)
    twin = ax.twinx()
    left, right = [], []
    for i, pair in enumerate(pairs):
        lower, upper = np.asarray(probability_interval_estimates[pair],
                                  dtype=np.float64).reshape(2, -1)[:, 0]
        x_name, y_name = pair.split(pair_separator)
        left.append(x_name)
        right.append(y_name)
        point = float(np.asarray(probability_estimates[pair]).ravel()[0])
        interval_bar(ax, i, lower, upper, point, colors[i], height=height, alpha=alpha,
                     tick_alpha=min(alpha + 0.1, 1.0), label=x_name)
        twin.barh(y=i, width=upper - lower, height=height, left=lower, color=colors[i],
                  alpha=0.0, label=y_name)
    for axis, names, label, grid in ((ax, left, left_ylabel, 0.2),
                                     (twin, right, right_ylabel, 0.0)):
        _decorate(axis, xlabel=xlabel, xticks=xticks, xticklabels=xticks,
                  yticks=list(range(len(pairs))), labelsize=labelsize,
                  ticklabelsize=ticklabelsize, grid_alpha=grid, **kwargs)
        axis.set_yticklabels(names, fontsize=ticklabelsize)
        axis.set_ylabel(label, fontweight="bold", rotation="horizontal", va="bottom",
                        fontsize=labelsize)
        axis.spines["left"].set_visible(False)
    ax.yaxis.set_label_coords(-ylabel_x, 1.0)
    twin.yaxis.set_label_coords(1 + 0.7 * ylabel_x, 1.0)
    return ax


def plot_interval_estimates(point_estimates: Mapping[str, Any],
                            interval_estimates: Mapping[str, Any],
                            metric_names: Sequence[str],
                            algorithms: Sequence[str] | None = None,
                            colors: Mapping[str, Any] | None = None,
                            color_palette: Any = "colorblind",
                            max_ticks: int = 4,
                            subfigure_width: float = 3.4,
                            row_height: float = 0.37,
                            xlabel_y_coordinate: float = -0.1,
                            xlabel: str = "Normalized Score",
                            **kwargs: Any):
    """One panel per metric, one bar per algorithm: the CI as a bar, the point estimate
    as a tick. interval_estimates[alg] is (2, metrics). Returns (fig, axes)."""
    plt = _pyplot()
    algorithms = list(point_estimates) if algorithms is None else list(algorithms)
    missing = [a for a in algorithms if a not in point_estimates or a not in interval_estimates]
    if missing:
        raise AnalysisError(f"no estimates for {missing}; have {sorted(point_estimates)}")
    n_metrics = len(np.atleast_1d(point_estimates[algorithms[0]]))
    if len(metric_names) != n_metrics:
        raise AnalysisError(f"{len(metric_names)} metric_names for {n_metrics} metrics")
    colors = dict(colors) if colors is not None else palette_colors(algorithms, color_palette)
    height = kwargs.pop("interval_height", 0.6)
    fig, axes = plt.subplots(nrows=1, ncols=n_metrics,
                             figsize=(subfigure_width * n_metrics, row_height * len(algorithms)))
    axes_list = np.atleast_1d(axes)
    for m, (ax, metric) in enumerate(zip(axes_list, metric_names, strict=True)):
        for i, alg in enumerate(algorithms):
            ci = np.asarray(interval_estimates[alg], dtype=np.float64).reshape(2, -1)
            interval_bar(ax, i, ci[0, m], ci[1, m], np.atleast_1d(point_estimates[alg])[m],
                         colors[alg], height=height, tick_alpha=0.5, label=alg)
        ax.set_yticks(range(len(algorithms)))
        ax.xaxis.set_major_locator(plt.MaxNLocator(max_ticks))
        if m == 0:
            ax.set_yticklabels(algorithms, fontsize="x-large")
        else:
            ax.set_yticks([])
        ax.set_title(metric, fontsize="xx-large")
        _decorate(ax, ticklabelsize="xx-large")
        ax.spines["left"].set_visible(False)
        ax.grid(False, axis="y")
    fig.text(0.4, xlabel_y_coordinate, xlabel, ha="center", fontsize="xx-large")
    plt.subplots_adjust(wspace=kwargs.pop("wspace", 0.11), left=0.0)
    return fig, axes


def plot_sample_efficiency_curve(frames: Sequence[float] | np.ndarray,
                                 point_estimates: Mapping[str, Any],
                                 interval_estimates: Mapping[str, Any],
                                 algorithms: Sequence[str] | None = None,
                                 colors: Mapping[str, Any] | None = None,
                                 color_palette: Any = "colorblind",
                                 figsize: tuple[float, float] = (7, 5),
                                 xlabel: str = r"Number of Frames (in millions)",
                                 ylabel: str = "Aggregate Human Normalized Score",
                                 ax=None,
                                 labelsize: Any = "xx-large",
                                 ticklabelsize: Any = "xx-large",
                                 **kwargs: Any):
    """An aggregate metric against frames, one line and CI band per algorithm. Returns ax."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    algorithms = list(point_estimates) if algorithms is None else list(algorithms)
    colors = dict(colors) if colors is not None else palette_colors(algorithms, color_palette)
    marker = kwargs.pop("marker", "o")
    linewidth = kwargs.pop("linewidth", 2)
    for alg in algorithms:
        values = np.asarray(point_estimates[alg], dtype=np.float64)
        lower, upper = np.asarray(interval_estimates[alg], dtype=np.float64)
        if not len(frames) == len(values) == len(lower):
            raise AnalysisError(f"{alg}: {len(frames)} frames but {len(values)} point "
                                f"estimates and {len(lower)} CI bounds")
        line_with_band(ax, frames, values, (lower, upper), colors[alg], band_alpha=0.2,
                       lw=linewidth, marker=marker, label=alg)
    return _decorate(ax, xlabel=xlabel, ylabel=ylabel, labelsize=labelsize,
                     ticklabelsize=ticklabelsize, **kwargs)


def plot_performance_profiles(performance_profiles: Mapping[str, Any],
                              tau_list: Sequence[float] | np.ndarray,
                              performance_profile_cis: Mapping[str, Any] | None = None,
                              use_non_linear_scaling: bool = False,
                              ax=None,
                              colors: Mapping[str, Any] | None = None,
                              color_palette: Any = "colorblind",
                              alpha: float = 0.15,
                              figsize: tuple[float, float] = (10, 5),
                              xticks: Sequence[float] | None = None,
                              yticks: Sequence[float] | None = None,
                              xlabel: str = r"Normalized Score ($\tau$)",
                              ylabel: str = r"Fraction of runs with score $> \tau$",
                              linestyles: Mapping[str, Any] | None = None,
                              **kwargs: Any):
    """Performance profiles with CI bands. use_non_linear_scaling places each tau at 1 -
    the profiles' mean there (rliable's scaling: a stretch of taus takes room in
    proportion to the runs it holds), ticks labelled with tau values (`xticks`: the
    taus to label, each one of tau_list). Returns ax."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    keys = list(performance_profiles)
    colors = dict(colors) if colors is not None else palette_colors(keys, color_palette)
    linestyles = dict(linestyles) if linestyles is not None else dict.fromkeys(keys, "solid")
    taus = np.asarray(tau_list, dtype=np.float64)
    xticklabels: Any = None
    x = taus
    if use_non_linear_scaling:  # tick positions and labels as rliable's
        x = 1 - np.mean([np.asarray(p, dtype=np.float64)
                         for p in performance_profiles.values()], axis=0)
        if xticks is None:
            indices = np.logspace(0, np.log2(len(taus) - 1), base=2, num=5).astype(np.int32)
            xticklabels = [taus[i] for i in indices]
        else:
            listed = list(taus)
            missing = [t for t in xticks if t not in listed]
            if missing:
                raise AnalysisError(f"xticks {missing} are not in tau_list")
            xticklabels = xticks
            indices = np.array([listed.index(t) for t in xticks])
        xticks = list(x[indices])
    linewidth = kwargs.pop("linewidth", 2.0)
    for key in keys:
        line_with_band(ax, x, performance_profiles[key], (performance_profile_cis or {}).get(key),
                       colors[key], band_alpha=alpha, lw=linewidth, linestyle=linestyles[key],
                       label=key)
    return _decorate(ax, xlabel=xlabel, ylabel=ylabel, xticks=xticks,
                     yticks=[0.0, 0.25, 0.5, 0.75, 1.0] if yticks is None else yticks,
                     xticklabels=xticklabels, **kwargs)
