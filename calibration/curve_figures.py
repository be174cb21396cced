"""Figures of the calibration of the looks over training time (docs/analysis.md): the
false-fail rate by look against the planned alpha(t), the detection rate and frames to
decision of the five cases, and the QQ-plot of the look statistics. PNG, Agg backend,
the project's palette and curve-with-band (analysis.output.marks)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from analysis.output.marks import OKABE_ITO, line_with_band  # noqa: E402
from calibration.curve_cells import MARGIN, CurveCalibration  # noqa: E402

FALSE_FAIL = "curve-looks-false-fail-by-look.png"
DETECTION = "curve-looks-detection.png"
QQ = "curve-looks-qq.png"


def write_figures(cal: CurveCalibration, out_dir: Path) -> list[Path]:
    """The three figures under out_dir; their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [p for p in (_false_fail(cal, out_dir / FALSE_FAIL),
                        _detection(cal, out_dir / DETECTION),
                        _qq(cal, out_dir / QQ)) if p is not None]


FIGURE_SETTINGS = ("3 vs 3 seeds, delta 0.3, looks at", "10 vs 10 seeds, delta 0.3, looks at")
"""The settings the false-fail figure shows (pocock; each shape): the smoke's seeds and
margin, and enough reference seeds to estimate the correlation."""


def _false_fail(cal: CurveCalibration, path: Path) -> Path | None:
    rows = [b for b in cal.by_look if b.case == MARGIN and "pocock" in b.scenario
            and any(f in b.scenario for f in FIGURE_SETTINGS)]
    scenarios = sorted({b.scenario.rsplit(", ", 1)[0] for b in rows})
    if not scenarios:
        return None
    cols = 2
    nrows = -(-len(scenarios) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(11, 4.2 * nrows), squeeze=False,
                             sharey=True)
    for ax in axes.flat[len(scenarios):]:
        ax.set_visible(False)
    for ax, scen in zip(axes.flat, scenarios, strict=False):
        mine = [b for b in rows if b.scenario.rsplit(", ", 1)[0] == scen]
        t = np.array(mine[0].fractions)
        ax.plot(t, mine[0].alpha_t, color="black", lw=2, label="planned alpha(t)")
        for colour, b in zip(OKABE_ITO[1:], mine, strict=False):
            label = b.method.replace(" (too few reference seeds: union bound)",
                                     " (3 seeds: the union bound)")
            line_with_band(ax, t, b.rate, (b.low, b.high), colour, band_alpha=0.2, lw=1.5,
                           marker="o", label=label)
        ax.set_title(_wrap(scen.replace(", looks at 10%/20%/30%/50%/70%/100%", ""), 60),
                     fontsize=9)
        ax.set_xlabel("share of the frame budget")
        ax.grid(alpha=0.3)
    fig.subplots_adjust(hspace=0.45)
    for row in axes:
        row[0].set_ylabel("cumulative false-fail rate\nat the margin")
        row[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9)
    fig.suptitle(f"False fails by look at the margin, Clopper-Pearson 95% bands "
                 f"({mine[0].sims} replicates per cell)", fontsize=11)
    return _save(fig, path)


def _short(scenario: str) -> str:
    """'cleanba-ppo ... , 3 vs 10 seeds, ...' -> 'cleanba-ppo, 3 vs 10 seeds'."""
    parts = scenario.split(", ")
    return f"{parts[0].split(' ')[0]}, {parts[1]}"


def _detection(cal: CurveCalibration, path: Path) -> Path | None:
    shown = [d for d in cal.detection if "delta 0.3," in d.scenario and "pocock" in d.scenario]
    if not shown:
        return None
    scenarios = list(dict.fromkeys(d.scenario for d in shown))
    cases = list(dict.fromkeys(d.case for d in shown))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 1.2 * len(cases) + 2))
    height = 0.8 / len(scenarios)
    for i, scen in enumerate(scenarios):
        got = {d.case: d for d in shown if d.scenario == scen}
        y = np.arange(len(cases)) + i * height
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        left.barh(y, [got[c].detected if c in got else np.nan for c in cases], height,
                  color=colour, label=_short(scen))
        right.barh(y, [got[c].frames if c in got else np.nan for c in cases], height,
                   color=colour)
    for ax in (left, right):
        ax.set_yticks(np.arange(len(cases)) + 0.4 - height / 2)
        ax.set_yticklabels([_wrap(c, 28) for c in cases], fontsize=9)
        ax.invert_yaxis()
        ax.grid(alpha=0.3, axis="x")
    right.set_yticklabels([])
    left.set_xlabel("detection rate (REGRESSION at any look)")
    right.set_xlabel("frames to decision (share of the budget; 1 = ran to the end)")
    left.set_xlim(0, 1)
    right.set_xlim(0, 1)
    left.legend(loc="upper center", bbox_to_anchor=(1.05, -0.12), fontsize=9, ncol=4)
    fig.suptitle("Five regressions: detection and frames to decision (delta 0.3, Pocock, "
                 f"looks at 10/20/30/50/70/100%; {shown[0].sims} replicates per bar)",
                 fontsize=11)
    return _save(fig, path)


def _qq(cal: CurveCalibration, path: Path) -> Path | None:
    if not cal.qq:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5), sharex=True, sharey=True)
    for colour, (n, z) in zip(OKABE_ITO[1:], sorted(cal.qq.items()), strict=False):
        for ax, values in ((left, cal.qq_raw[n]), (right, z)):
            v = np.sort(values[np.isfinite(values)])
            q = stats.norm.ppf((np.arange(1, len(v) + 1) - 0.5) / len(v))
            step = max(1, len(v) // 400)
            ax.plot(q[::step], v[::step], ".", ms=3, color=colour, label=f"{n} vs {n} seeds")
    for ax, title in ((left, "contrast / se against N(0, 1)"),
                      (right, "Student t at Welch's df, carried to N(0, 1)")):
        ax.plot([-4, 4], [-4, 4], color="black", lw=1)
        ax.set_xlim(-4, 4)
        ax.set_ylim(-6, 6)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("normal quantile")
        ax.grid(alpha=0.3)
    left.set_ylabel("look statistic quantile (at the margin, every look)")
    right.legend(loc="lower right", fontsize=9)
    return _save(fig, path)


def _wrap(text: str, width: int = 48) -> str:
    """`text` in lines of at most `width` characters, broken at spaces only."""
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False)


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def markdown_sections(cal: CurveCalibration, scenarios: Sequence[str] | None = None
                      ) -> list[str]:
    """The by-look and detection tables as markdown (docs/analysis.md)."""
    lines = ["### False fails by look (at the margin; cumulative, Clopper-Pearson 95%)", "",
             "| scenario | method | " + " | ".join(
                 f"{t:.0%}" for t in (cal.by_look[0].fractions if cal.by_look else [])) + " |",
             "|---|---|" + "---|" * len(cal.by_look[0].fractions if cal.by_look else [])]
    for b in cal.by_look:
        if b.case != MARGIN or (scenarios and b.scenario not in scenarios):
            continue
        cells = [f"{r:.3f} [{lo:.3f}, {hi:.3f}] / {a:.3f}"
                 for r, lo, hi, a in zip(b.rate, b.low, b.high, b.alpha_t, strict=True)]
        lines.append(f"| {b.scenario.rsplit(', ', 1)[0]} | {b.method} | "
                     + " | ".join(cells) + " |")
    lines += ["", "Each cell: rate [CP 95%] / planned alpha(t).", "",
              "### Detection and frames to decision", "",
              "| scenario | case | detected | PASS | frames to decision | frames saved |",
              "|---|---|---|---|---|---|"]
    for d in cal.detection:
        lines.append(f"| {d.scenario} | {d.case} | {d.detected:.3f} | {d.passed:.3f} | "
                     f"{d.frames:.3f} ± {d.frames_se:.3f} | {1 - d.frames:.1%} |")
    return lines
