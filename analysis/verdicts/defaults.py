"""Defaults of the verdicts' flags, in a module without scipy: the CLI's flags read them
at start-up, and a command that plans or gates nothing should not pay for importing
scipy.stats (~0.5 s)."""

DEFAULT_SEEDS = (3, 5, 10, 20)
"""Seeds per side the seed plan prints power for (analysis.verdicts.seedplan)."""
DEFAULT_SIMS = 20_000
"""Monte Carlo draws per power figure of the seed plan."""
DEFAULT_WORST = 5
"""Games the gate lists as its largest drops (analysis.verdicts.gate)."""
