"""The marks that the report's figures and analysis.rly's rliable-style plots both draw,
on an Axes the caller made: a bar per row from a CI's low to its high with a tick at the
point estimate, and a line with its CI band (a learning curve, a performance profile).

No pyplot and no backend here: analysis.rly draws with the user's matplotlib setup, the
report's figures with Agg.
"""

from __future__ import annotations

from typing import Any

import numpy as np


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
