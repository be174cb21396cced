"""Verdicts: equivalence (Welch TOST), the regression gate, margins, the pairing
of groups, the seed planner and the staleness audit.
"""
