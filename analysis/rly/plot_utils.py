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
from analysis.output.palette import OKABE_ITO


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
            lo, hi = ci[0, m], ci[1, m]
            ax.barh(y=i, width=hi - lo, height=height, left=lo, color=colors[alg], alpha=0.75,
                    label=alg)
            point = np.atleast_1d(point_estimates[alg])[m]
            ax.vlines(x=point, ymin=i - 7.5 * height / 16, ymax=i + 6 * height / 16,
                      color="k", alpha=0.5)
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
        ax.plot(frames, values, color=colors[alg], marker=marker, linewidth=linewidth,
                label=alg)
        ax.fill_between(frames, y1=lower, y2=upper, color=colors[alg], alpha=0.2)
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
    """Performance profiles with CI bands. use_non_linear_scaling spaces the taus evenly
    on the x axis (dense low taus stretched), labelled with their values. Returns ax."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    keys = list(performance_profiles)
    colors = dict(colors) if colors is not None else palette_colors(keys, color_palette)
    linestyles = dict(linestyles) if linestyles is not None else dict.fromkeys(keys, "solid")
    taus = np.asarray(tau_list, dtype=np.float64)
    xticklabels = None
    x = taus
    if use_non_linear_scaling:
        x = np.arange(len(taus), dtype=np.float64)  # equal spacing per threshold
        chosen = np.asarray(xticks, dtype=np.float64) if xticks is not None else \
            taus[np.linspace(0, len(taus) - 1, min(len(taus), 5)).round().astype(int)]
        xticks = list(np.interp(chosen, taus, x))
        xticklabels = [f"{t:g}" for t in chosen]
    linewidth = kwargs.pop("linewidth", 2.0)
    for key in keys:
        ax.plot(x, performance_profiles[key], color=colors[key], linestyle=linestyles[key],
                linewidth=linewidth, label=key)
        if performance_profile_cis is not None and key in performance_profile_cis:
            lower, upper = performance_profile_cis[key]
            ax.fill_between(x, lower, upper, color=colors[key], alpha=alpha)
    return _decorate(ax, xlabel=xlabel, ylabel=ylabel, xticks=xticks,
                     yticks=[0.0, 0.25, 0.5, 0.75, 1.0] if yticks is None else yticks,
                     xticklabels=xticklabels, **kwargs)
