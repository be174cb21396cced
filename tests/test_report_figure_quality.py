"""The report's figures at publication quality, measured on the drawn figures: tick
labels that never overlap over a narrow range, a one-seed group's points and note instead
of a zero-width bar or band, and curves (frames and wall time) that end where their runs
end."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.patches import Rectangle
from synthetic_records import write_synthetic_run

from analysis.output import figures as figs
from analysis.scoring.grouping import analyse
from analysis.scoring.scores import efficiency_curve
from analysis.stats.metrics import Interval

ONE_SEED_TEXT = "1 seed: no interval"


def _drawn(info):
    canvas = FigureCanvasAgg(info.figure)
    canvas.draw()
    return info.figure, canvas.get_renderer()


def _tick_labels_overlap(ax, renderer) -> list[str]:
    labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
    boxes = sorted(((t.get_window_extent(renderer), t.get_text()) for t in labels),
                   key=lambda b: b[0].x0)
    return [f"{a[1]} / {b[1]}" for a, b in zip(boxes, boxes[1:], strict=False)
            if a[0].overlaps(b[0])]


def _suite(root):
    a = analyse([root])
    assert len(a.suites) == 1, a.warnings
    return a.suites[0]


@pytest.mark.parametrize("centre, half_width", [(-0.03425, 0.00025), (0.1745, 0.0),
                                                (1234.5, 0.02), (0.8254, 0.002)])
def test_aggregate_tick_labels_never_overlap_on_a_narrow_range(tmp_path, centre, half_width):
    """An Atari aggregate from -0.0345 to -0.0340 (the reviewer's -0.0345-0.0340...), a
    one-seed point (zero span) and a large score with a tiny interval."""
    results = {g: {m: Interval(centre + k * half_width / 3, centre - half_width,
                               centre + half_width)
                   for m in ("median", "iqm", "mean", "optimality_gap")}
               for k, g in enumerate(("sys / cleanba / a0-l0-d1", "sys / cleanba / a0-l1-d1"))}
    fig, renderer = _drawn(figs.aggregate_intervals_figure(results, tmp_path))
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert panels
    for ax in panels:
        assert not _tick_labels_overlap(ax, renderer), (ax.get_title(),
                                                        _tick_labels_overlap(ax, renderer))
        assert len([t for t in ax.get_xticklabels() if t.get_text()]) >= 2


def test_one_seed_aggregate_shows_its_point_and_a_note_not_a_bar(tmp_path):
    results = {g: {m: Interval(0.5 + i * 0.1, 0.5 + i * 0.1, 0.5 + i * 0.1)
                   for m in ("median", "optimality_gap")} for i, g in enumerate(("a", "b"))}
    info = figs.aggregate_intervals_figure(results, tmp_path, seeds={"a": 1, "b": 1})
    fig, _ = _drawn(info)
    for ax in (ax for ax in fig.axes if ax.get_title()):
        bars = [p for p in ax.patches if isinstance(p, Rectangle)]
        assert not bars  # a zero-width bar is no bar: its point is drawn instead
        points = [ln for ln in ax.lines if ln.get_marker() == "D"]
        assert len(points) == 2
        notes = [t.get_text() for t in ax.texts]
        assert notes.count(ONE_SEED_TEXT) == 2
    assert ONE_SEED_TEXT in info.caption


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two layouts of CartPole: a0-l0-d1 with 3 seeds whose runs take 1x, 1.5x and 2x the
    time; a0-l1-d1 with one seed."""
    root = tmp_path_factory.mktemp("runs")
    for s, per_frame in ((1, 1e-4), (2, 1.5e-4), (3, 2e-4)):
        write_synthetic_run(root, seed=s, layout="a0-l0-d1", episodes=120, updates=8,
                            total_frames=20_000, seconds_per_frame=per_frame)
    write_synthetic_run(root, seed=1, layout="a0-l1-d1", episodes=120, updates=8,
                        total_frames=20_000)
    return root


def test_one_seed_profile_and_curve_draw_points_and_note_not_a_band(runs, tmp_path):
    suite = _suite(runs)
    one = next(g for g, gs in suite.items() if len(gs.seeds) == 1)
    info = figs.performance_profile_figure({one: suite[one]}, tmp_path, reps=50)
    fig, _ = _drawn(info)
    ax = fig.axes[0]
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]  # no band
    diamonds = [ln for ln in ax.lines if ln.get_marker() == "D"]
    assert diamonds and len(diamonds[0].get_xdata()) == suite[one].final.size
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert any(ONE_SEED_TEXT in t for t in legend), legend
    curve = efficiency_curve(suite[one], reps=50)
    fig, _ = _drawn(figs.efficiency_curves_figure([curve], tmp_path, metric="median"))
    assert not [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    legend = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert any(ONE_SEED_TEXT in t for t in legend), legend


def test_a_one_seed_score_below_the_axis_gets_no_diamond_on_the_wrong_step(runs, tmp_path):
    """The smoke sweep's Breakout run (HNS -0.033) drew its diamond clipped to tau = 0 at
    height 1, where the profile is already 0; it is left off, and the caption says so."""
    import dataclasses

    suite = _suite(runs)
    one = next(g for g, gs in suite.items() if len(gs.seeds) == 1)
    below = dataclasses.replace(suite[one], final=np.full_like(suite[one].final, -0.033))
    info = figs.performance_profile_figure({one: below}, tmp_path, reps=50, name="pp_below")
    fig, _ = _drawn(info)
    diamonds = [ln for ln in fig.axes[0].lines if ln.get_marker() == "D"]
    assert diamonds and all(len(d.get_xdata()) == 0 for d in diamonds)
    assert "below 0 (below random) left of the axis: no diamond" in info.caption


def test_wall_time_curve_ends_where_the_runs_end(runs, tmp_path):
    suite = _suite(runs)
    three = next(gs for gs in suite.values() if len(gs.seeds) == 3)
    walls = three.wall_time_s.ravel()
    assert walls.max() > 1.3 * walls.min()  # the seeds' runs end at different times
    curve = efficiency_curve(three, axis="wall_time_s", reps=100)
    iv = curve.metrics["median"]
    # The line reaches the last run's end and no further.
    last = np.flatnonzero(np.isfinite(iv.point))[-1]
    assert curve.grid[last] == pytest.approx(walls.max())
    # The band: only where every seed still has data, and the curve says where it ends.
    band = np.isfinite(iv.low) & np.isfinite(iv.high)
    assert curve.band_end is not None and curve.band_end <= walls.min() * (1 + 1e-9)
    assert not band[curve.grid > walls.min() * (1 + 1e-9)].any()
    assert band[curve.grid <= walls.min()].all()
    # Past the first run's end the line is the runs still going, not the held last value.
    after = curve.grid > walls.min() * (1 + 1e-6)
    only_last = three.time_curves[np.argmax(three.wall_time_s[:, 0]), 0]
    assert iv.point[-1] == pytest.approx(only_last[-1])
    info = figs.efficiency_curves_figure([curve], tmp_path, metric="median")
    fig, _ = _drawn(info)
    (line,) = [ln for ln in fig.axes[0].lines if ln.get_label() == curve.group]
    x, y = line.get_xdata(), np.asarray(line.get_ydata(), dtype=float)
    assert x[np.isfinite(y)][-1] * figs._time_label(curve.grid)[0] == pytest.approx(walls.max())
    assert after.any() and "band stops where the group's first run ended" in info.caption


def test_frame_curve_ends_where_the_runs_end(tmp_path):
    """Two seeds of one group, one trained half the frames of the other (an interrupted
    or imported run): the frame curve reaches the longer run's end, its band stops at the
    shorter run's, and past it the line is the longer run alone, not the shorter one's
    last value held flat."""
    for s, frames in ((1, 20_000), (2, 10_000)):
        write_synthetic_run(tmp_path, seed=s, episodes=120 * frames // 20_000, updates=8,
                            total_frames=frames)
    (gs,) = _suite(tmp_path).values()
    assert sorted(gs.frames.ravel()) == [10_000, 20_000]
    curve = efficiency_curve(gs, axis="frames", reps=100)
    iv = curve.metrics["iqm"]
    assert curve.grid[-1] == pytest.approx(20_000)
    assert np.isfinite(iv.point).all()
    band = np.isfinite(iv.low) & np.isfinite(iv.high)
    assert curve.band_end is not None and curve.band_end <= 10_000
    assert band[curve.grid <= 10_000].all() and not band[curve.grid > 10_000].any()
    longer = gs.reach_curves[int(np.argmax(gs.frames[:, 0])), 0]
    past = curve.grid > 10_000
    assert iv.point[past] == pytest.approx(longer[past])
    info = figs.efficiency_curves_figure([curve], tmp_path, metric="iqm")
    assert "band stops where the group's first run ended" in info.caption
