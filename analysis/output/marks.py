"""The project's colours and markers, and the marks that the report's figures and
analysis.rly's rliable-style plots both draw on an Axes the caller made: a CI bar with a
tick at the point estimate, and a line with its CI band (a learning curve, a performance
profile). No matplotlib import: rly's plots keep the user's backend; figures.py sets Agg.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Okabe-Ito order and hues; orange, sky blue and yellow are darkened (#E69F00 -> #C47E00,
# #56B4E9 -> #2F88C0, #F0E442 -> #8C7B00) because the originals have 1.3-2.3:1 contrast
# on white and vanish as thin lines.
OKABE_ITO = ("#0072B2", "#C47E00", "#009E73", "#D55E00", "#CC79A7", "#2F88C0", "#8C7B00",
             "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def interval_bar(ax: Any, row: float, low: float, high: float, point: float, colour: Any, *,
                 height: float = 0.6, alpha: float = 0.75, tick_alpha: float = 1.0,
                 label: str | None = None) -> None:
    """The CI [low, high] as a horizontal bar centred on y = row, the point as a black
    tick across it (rliable's geometry: the tick a little shorter than the bar)."""
    ax.barh(y=row, width=high - low, height=height, left=low, color=colour, alpha=alpha,
            label=label)
    ax.vlines(x=point, ymin=row - 7.5 * height / 16, ymax=row + 6 * height / 16, color="k",
              alpha=tick_alpha, lw=2)


def line_with_band(ax: Any, x: Any, y: Any, band: Any | None, colour: Any, *,
                   band_alpha: float = 0.15, lw: float = 2, **line: Any) -> None:
    """A line through (x, y) and, unless band is None, the band between its two rows
    (low, high) in the line's colour; the band is left out where a bound is NaN (there
    is no interval there, e.g. past the end of a group's shortest run). `line`: further
    Axes.plot keywords (label, marker, markevery, linestyle)."""
    ax.plot(x, y, color=colour, lw=lw, **line)
    if band is None:
        return
    low, high = (np.asarray(b, dtype=np.float64) for b in band)
    ax.fill_between(x, low, high, where=np.isfinite(low) & np.isfinite(high), color=colour,
                    alpha=band_alpha, lw=0)
