"""Axis ticks and one-seed marks shared by the report's figures.

Ticks: a narrow range of long numbers (an Atari aggregate from -0.0345 to -0.0340) gets
matplotlib's default of up to nine ticks, whose labels then run into each other on a
panel a few inches wide; `few_ticks` keeps few ticks, labelled with only the decimals
their spacing needs. One seed: a bootstrap over one seed resamples the same run, so its
"interval" has zero width; a figure draws the seed's point and says so (ONE_SEED_NOTE)
rather than an empty bar or an invisible band.
"""

from __future__ import annotations

from typing import Any

from matplotlib.ticker import MaxNLocator, ScalarFormatter

ONE_SEED_NOTE = "1 seed: no interval"
MAX_TICKS = 5


def few_ticks(axis: Any, nbins: int = MAX_TICKS) -> None:
    """At most `nbins` + 1 ticks at round steps, labelled in plain decimals (no offset
    such as '+1e3' to add, no scientific notation for ordinary scores)."""
    axis.set_major_locator(MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10]))
    formatter = ScalarFormatter(useOffset=False)
    formatter.set_powerlimits((-4, 5))
    axis.set_major_formatter(formatter)


def one_seed_mark(ax: Any, x: float, y: float, colour: str, *, text: str = ONE_SEED_NOTE
                  ) -> None:
    """A one-seed group's point: a filled marker at (x, y) and the note beside it, on the
    side of the marker with more room (the axes' x limits must be set already)."""
    ax.plot([x], [y], marker="D", ms=8, color=colour, markeredgecolor="black", ls="none",
            zorder=3)
    lo, hi = sorted(ax.get_xlim())
    right = x <= (lo + hi) / 2
    ax.annotate(text, (x, y), xytext=(8 if right else -8, 0), textcoords="offset points",
                va="center", ha="left" if right else "right", fontsize=9, color="#333")
