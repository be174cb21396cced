"""Layout copies of one seed count once."""

from __future__ import annotations

import numpy as np
import pytest
from score_groups import group_scores

from analysis.errors import AnalysisError
from analysis.scoring.scores import collapse_seed_copies


def _group(name: str, seeds: list[int], final: list[list[float]], tasks=("Pong-v5",)):
    f = np.array(final, dtype=np.float64)
    z = np.zeros((len(seeds), len(tasks), 2))
    return group_scores(name, tasks, seeds, f, z)


def test_copies_are_averaged_per_seed():
    a = _group("a0-l0-d1", [1, 2, 3], [[1.0], [2.0], [3.0]])
    b = _group("a0-l1-d1", [1, 2, 3], [[1.0], [2.0], [3.0]])
    c = _group("a0-l0,1-d1", [2, 3, 4], [[2.2], [3.0], [5.0]])
    sv = collapse_seed_copies([a, b, c], "cleanba-ppo")
    assert sv.seeds == [1, 2, 3, 4]
    assert sv.copies == [2, 3, 3, 1]
    assert sv.n_seeds == 4 and sv.n_runs == 9
    np.testing.assert_allclose(sv.values[:, 0], [1.0, 6.2 / 3, 3.0, 5.0])
    assert sv.describe() == "4 seeds (9 runs: layout copies averaged per seed)"


def test_different_games_are_refused():
    a = _group("a", [1], [[1.0]], tasks=("Pong-v5",))
    b = _group("b", [1], [[1.0]], tasks=("Breakout-v5",))
    with pytest.raises(AnalysisError, match="different games"):
        collapse_seed_copies([a, b], "x")
