"""The project's colours and markers, without matplotlib (analysis.rly's plots import
them and leave the user's matplotlib backend alone; figures.py sets Agg)."""

from __future__ import annotations

# Okabe-Ito order and hues; orange, sky blue and yellow are darkened (#E69F00 -> #C47E00,
# #56B4E9 -> #2F88C0, #F0E442 -> #8C7B00) because the originals have 1.3-2.3:1 contrast
# on white and vanish as thin lines.
OKABE_ITO = ("#0072B2", "#C47E00", "#009E73", "#D55E00", "#CC79A7", "#2F88C0", "#8C7B00",
             "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
