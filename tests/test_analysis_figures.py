"""What a reader sees in the figures: measured on the drawn matplotlib figures (window
extents of the artists after drawing), not on the code that drew them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.legend import Legend
from matplotlib.transforms import Bbox
from synthetic_records import write_synthetic_run

from analysis.inputs.load import load_runs
from analysis.output import figures as figs
from analysis.scoring.grouping import analyse
from analysis.scoring.scores import efficiency_curve
from analysis.scoring.tables import aggregate_intervals
from analysis.stats.metrics import AGGREGATE_LABELS
from analysis.verdicts.staleness import audit

LAYOUTS = ("a0-l0-d1", "a0-l1-d1", "a0-l0,1-d1", "a0-l0-d2")


def contrast_ratio(colour_hex: str, background: str = "#FFFFFF") -> float:
    """WCAG 2 contrast ratio of two sRGB colours ('#RRGGBB'), from 1 to 21."""
    def luminance(h: str) -> float:
        c = [int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        lin = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    a, b = sorted((luminance(colour_hex), luminance(background)))
    return (b + 0.05) / (a + 0.05)


def _groups(root, **kw):
    """Suite dict (label -> GroupScores) of the synthetic runs under root."""
    a = analyse([root], **kw)
    assert len(a.suites) == 1, a.warnings
    return a.suites[0]


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory):
    """Four layouts x 2 seeds of CartPole: long group labels, many legend entries."""
    root = tmp_path_factory.mktemp("cartpole")
    for lay in LAYOUTS:
        for s in (1, 2):
            write_synthetic_run(root, seed=s, layout=lay, episodes=150, updates=12,
                                total_frames=20_000, skill=0.5)
    return root


@pytest.fixture(scope="module")
def atari(tmp_path_factory):
    """Three Atari games, sync and cleanba, 2 seeds; one game scores ~60 HNS."""
    root = tmp_path_factory.mktemp("atari")
    for game, skill in (("Breakout-v5", 1.0), ("Pong-v5", 0.5), ("VideoPinball-v5", 60.0)):
        for arch in ("cleanba", "sync"):
            for s in (1, 2):
                write_synthetic_run(root, env_id=game, seed=s, architecture=arch, skill=skill,
                                    episodes=120, updates=8, total_frames=40_000)
    return root


def _drawn(info):
    """(figure, renderer) of a saved (closed) figure, drawn again on an Agg canvas."""
    fig = info.figure
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return fig, canvas.get_renderer()


def _texts(fig):
    """Every drawn non-empty text of the figure: tick labels inside the view limits
    (matplotlib keeps, but does not draw, ticks beyond them), titles, axis labels,
    legend entries, annotations and figure-level labels."""
    out = list(fig.texts)
    for sup in (fig._supxlabel, fig._supylabel, fig._suptitle):
        if sup is not None:
            out.append(sup)
    for lg in fig.legends:
        out += lg.get_texts()
    for ax in fig.axes:
        if not (ax.get_visible() and ax.axison):
            continue
        out += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label,
                *ax.texts]
        if ax.get_legend() is not None:
            out += ax.get_legend().get_texts()
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            tol = 1e-9 * max(1.0, abs(hi - lo))
            out += [t.label1 for t in axis.get_major_ticks()
                    if lo - tol <= t.get_loc() <= hi + tol and t.label1.get_visible()]
    unique = {id(t): t for t in out}  # figure-level labels are in fig.texts too
    return [t for t in unique.values() if t.get_visible() and t.get_text().strip()]


def _overlapping_texts(fig, renderer):
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
            if ba.width > 0 and bb.width > 0 and ba.overlaps(bb)]


def _legend_inside_axes(fig, renderer):
    """(legend, axes) pairs whose boxes intersect."""
    legends = [x for x in fig.findobj(Legend) if x.get_visible()]
    assert legends, "figure has no legend"
    bad = []
    for lg in legends:
        lb = lg.get_window_extent(renderer)
        for ax in fig.axes:
            if ax.get_visible() and ax.axison and lb.overlaps(ax.get_window_extent(renderer)):
                bad.append((lg, ax))
    return bad


def test_every_palette_colour_has_3_to_1_contrast_on_white():
    assert len(set(figs.OKABE_ITO)) == len(figs.OKABE_ITO) == 8
    ratios = {c: contrast_ratio(c) for c in figs.OKABE_ITO}
    assert all(r >= 3.0 for r in ratios.values()), ratios
    # The measure itself: black 21:1, white 1:1, the original Okabe-Ito yellow fails.
    assert contrast_ratio("#000000") == pytest.approx(21.0)
    assert contrast_ratio("#FFFFFF") == pytest.approx(1.0)
    assert contrast_ratio("#F0E442") < 3.0


def test_performance_profile_tau_axis(cartpole, atari, tmp_path):
    # Atari HNS with a game far above 8: rliable's linear [0, 8].
    info = figs.performance_profile_figure(_groups(atari), tmp_path, reps=50,
                                           score_label="HNS")
    ax = info.figure.axes[0]
    lo, hi = ax.get_xlim()
    assert hi == 8.0 and -0.1 < lo <= 0.0 and ax.get_xscale() == "linear"
    assert "0 to 8 HNS" in info.caption and "above 8" in info.caption
    # Normalised CartPole scores (0..1): the axis ends at 1, not at the largest score.
    info = figs.performance_profile_figure(_groups(cartpole), tmp_path, reps=50,
                                           name="pp_cartpole")
    lo, hi = info.figure.axes[0].get_xlim()
    assert hi == pytest.approx(1.0) and lo <= 0.0
    assert "tau from 0 to 1" in info.caption
    assert figs.tau_range("HNS", 3.0)[1] == pytest.approx(3.06)  # all below 8: to the top


def test_legends_sit_outside_every_axes(cartpole, atari, tmp_path):
    cp = _groups(cartpole)
    curves = [efficiency_curve(gs, metrics=("median",), reps=50) for gs in cp.values()]
    one_game = figs.per_game_curves_figure(cp, tmp_path, name="pg1")
    at = _groups(atari)
    infos = [
        figs.efficiency_curves_figure(curves, tmp_path, metric="median"),
        figs.performance_profile_figure(cp, tmp_path, reps=50),
        one_game,
        figs.per_game_curves_figure(at, tmp_path, name="pg3"),
        figs.paired_final_scores_figure(*[at[g] for g in sorted(at)], tmp_path),
        figs.staleness_figure(audit(load_runs([cartpole]).included), tmp_path),
    ]
    for info in infos:
        fig, renderer = _drawn(info)
        assert not _legend_inside_axes(fig, renderer), info.name
        assert not _overlapping_texts(fig, renderer), (info.name,
                                                       _overlapping_texts(fig, renderer))
    # A one-game per-game figure is one full-size panel, not a thumbnail under the legend.
    fig, renderer = _drawn(one_game)
    panel = fig.axes[0].get_window_extent(renderer)
    legend = fig.legends[0].get_window_extent(renderer)
    assert panel.width >= 0.8 * legend.width and panel.width > 500


def test_runtime_labels_clear_of_whiskers_and_bars(tmp_path):
    labels = ["Moolib (Resnet CNN) 1 A100, 10 CPU", "Cleanba IMPALA, 1 A100, 10 CPU",
              "Cleanba IMPALA, 8 A100, 46 CPU", "Cleanba PPO (Sync), 1 A100, 10 CPU"]
    mean, std = [163.7, 138.7, 22.2, 215.6], [20.0, 22.0, 3.0, 22.0]
    info = figs.runtime_bars_figure(labels, mean, std, tmp_path, reference=1,
                                    error_what="std over games")
    fig, renderer = _drawn(info)
    ax = fig.axes[0]
    notes = [t for t in ax.texts if "x)" in t.get_text() or "reference" in t.get_text()]
    assert len(notes) == 4
    # Ratios to the named reference (as the paper table does), not to the fastest bar.
    assert "(reference)" in notes[1].get_text() and "(1.18x)" in notes[0].get_text()
    assert "error bars: std over games" in ax.get_xlabel()
    others = [p.get_window_extent(renderer) for p in ax.patches]
    for c in ax.collections:  # whiskers: one box per segment, not one for them all
        for seg in c.get_segments():
            others.append(Bbox(ax.transData.transform(seg)))
    for ln in ax.lines:  # caps: one marker per bar
        half = ln.get_markersize() * fig.dpi / 72 / 2 + 1
        for x, y in ax.transData.transform(ln.get_xydata()):
            others.append(Bbox.from_extents(x - half, y - half, x + half, y + half))
    for t in notes:
        tb = t.get_window_extent(renderer)
        assert not any(tb.overlaps(o) for o in others), t.get_text()
        assert ax.get_window_extent(renderer).contains(tb.x1 - 1, tb.y0 + 1)  # not cut
    assert not _overlapping_texts(fig, renderer)


def test_aggregate_axes_leave_room_for_the_extremes(cartpole, tmp_path):
    agg = aggregate_intervals(_groups(cartpole), reps=300)
    info = figs.aggregate_intervals_figure(agg, tmp_path)
    # aggregates with the same intervals share a panel (one task: median = IQM = mean)
    key = {label: m for m, label in AGGREGATE_LABELS.items()}
    panels = [ax for ax in info.figure.axes if ax.get_title()]
    assert len(panels) < len(next(iter(agg.values())))
    for ax in panels:
        metric = key[ax.get_title().split(" = ")[0]]
        lo, hi = ax.get_xlim()
        values = [float(v) for iv in agg.values()
                  for v in (iv[metric].low, iv[metric].high, iv[metric].point)]
        assert lo < min(values) and max(values) < hi, metric


def test_paired_scores_switch_to_symlog_when_one_game_dwarfs_the_rest(atari, tmp_path):
    at = _groups(atari)
    a, b = (at[g] for g in sorted(at))
    info = figs.paired_final_scores_figure(a, b, tmp_path)
    assert info.figure.axes[0].get_yscale() == "symlog" and "log" in info.caption
    assert figs.needs_log_scale(np.array([1.0, 2.0, 1.5, 300.0]))
    assert not figs.needs_log_scale(np.array([0.2, 0.5, 0.9, 1.1]))
