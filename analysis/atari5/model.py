"""Atari-5: the 57-game median human-normalised score (HNS) estimated from five games.

Method (Aitchison, Sweetser and Hutter, "Atari-5: Distilling the Arcade Learning
Environment down to Five Games", ICML 2023, arXiv 2210.02019), refitted here on their
published dataset (shipped: analysis/data/published/atari5/dataset.csv) by
`python -m analysis.atari5.fit`, which stores the model in analysis/data/atari5.json:

- transform: z = log10(1 + max(HNS%, 0)) of each game's score (HNS in percent);
- target: z of the algorithm's median HNS% over the 57 games;
- least squares of the target on the five games' z, on the published algorithms that
  have all 57 games (so the target is the exact 57-game median), with an intercept only
  when it lowers the leave-one-algorithm-out (LOO) mean squared error;
- model error: the LOO residuals (each algorithm predicted by the fit on the others).

Estimates for runs and their interval (seed uncertainty and model error):
analysis.atari5.estimate, as docs/atari5.md ("Method", steps 5 and 6) describes them.

Atari-3 (BattleZone, NameThisGame, Phoenix; the paper's development subset) is fitted the
same way and always labelled as such: its error is larger.

Everything here is a pure function of arrays or the stored model; reading the CSV/JSON
is at the edges (read_dataset, load_model).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.published_data import ATARI5_DATASET
from analysis.scales.normalize import atari_env_id
from analysis.stats.welch import t_upper

ATARI5 = "atari5"
ATARI3 = "atari3"
SUBSETS: dict[str, tuple[str, ...]] = {
    ATARI5: ("BattleZone-v5", "DoubleDunk-v5", "NameThisGame-v5", "Phoenix-v5", "Qbert-v5"),
    ATARI3: ("BattleZone-v5", "NameThisGame-v5", "Phoenix-v5"),
}
LABELS = {ATARI5: "Atari-5", ATARI3: "Atari-3 (development subset: larger error)"}

# The fitted model ships with the package (pyproject package-data: analysis/data/).
MODEL_FILE = Path(__file__).resolve().parent.parent / "data" / "atari5.json"
DATASET = ATARI5_DATASET
"""The paper's dataset (MIT licence), shipped as package data:
analysis/data/published/atari5/dataset.csv (its README.md says where from)."""

# What the authors report for their fit (44 algorithms with >= 40 of the 57 games, no
# intercept): coefficients and the 10-fold cross-validated mean absolute error of the log
# estimate, as a relative error in % (MAE in log10 x ln 10 x 100). Source: the authors'
# AtariScoreNormalizer.SUBSETS (maitchison's code accompanying the paper); the paper's
# headline: "within 10%".
PAPER: dict[str, dict[str, Any]] = {
    ATARI5: {"coefficients": (0.3819751237831753, 0.0679099488887574, 0.310804148620847,
                              0.12412619402774641, 0.08048518286466755),
             "relative_error_percent": 10.4},
    ATARI3: {"coefficients": (0.3705645071598444, 0.513268255229986, 0.10151691314166367),
             "relative_error_percent": 13.7},
}
PAPER_MIN_GAMES = 40
MIN_GAMES = 57
DEFAULT_CONFIDENCE = 0.9
DEFAULT_REPS = 20_000
COVERAGE_LEVELS = (0.5, 0.8, 0.9)
LN10 = math.log(10.0)


# ---------------------------------------------------------------- transform

def transform(hns_percent) -> np.ndarray:
    """z = log10(1 + HNS%), HNS clipped at 0 (the paper's transform)."""
    return np.log10(1.0 + np.clip(np.asarray(hns_percent, dtype=np.float64), 0.0, None))


def inverse_transform(z) -> np.ndarray:
    """HNS% from z (inverse of `transform` above 0)."""
    return np.power(10.0, np.asarray(z, dtype=np.float64)) - 1.0


def relative_error_percent(log_error) -> float:
    """An error in log10 units as the paper's relative error in % (x ln 10 x 100)."""
    return float(log_error) * LN10 * 100.0


def dataset_game(env_id: str) -> str:
    """`BattleZone-v5` (or `BattleZoneNoFrameskip-v4`) -> the dataset's `battlezone`."""
    return atari_env_id(env_id).split("-")[0].lower()


# ---------------------------------------------------------------- the published dataset

@dataclass(frozen=True)
class PublishedScores:
    """The dataset as a matrix: hns_percent[a, g] (NaN where not published)."""

    algorithms: list[str]
    games: list[str]  # dataset names, e.g. "battlezone"
    hns_percent: np.ndarray  # (algorithms, games)
    random: dict[str, float]
    human: dict[str, float]
    sha256: str = ""
    rows: int = 0
    duplicates: int = 0  # (algorithm, game) rows published twice (averaged)

    def games_per_algorithm(self) -> np.ndarray:
        return np.isfinite(self.hns_percent).sum(axis=1)



def read_dataset(path: Path | str = DATASET) -> PublishedScores:
    """Read the paper's dataset.csv (columns Algorithm, Game, Normalized, Random, Human,
    In57). Rows outside the 57 games are ignored; a pair published twice is averaged."""
    path = Path(path)
    if not path.exists():
        raise AnalysisError(f"{path}: no such file (the Atari-5 dataset; the project ships "
                            "it as analysis/data/published/atari5/dataset.csv)")
    data = path.read_bytes()
    reader = csv.DictReader(data.decode("utf-8").splitlines())
    need = {"Algorithm", "Game", "Normalized", "Random", "Human"}
    if not reader.fieldnames or not need <= set(reader.fieldnames):
        raise AnalysisError(f"{path}: expected columns {sorted(need)}, got {reader.fieldnames}")
    cells: dict[tuple[str, str], list[float]] = {}
    random: dict[str, float] = {}
    human: dict[str, float] = {}
    rows = 0
    for r in reader:
        if r.get("In57", "True") != "True":
            continue
        rows += 1
        game = r["Game"]
        cells.setdefault((r["Algorithm"], game), []).append(float(r["Normalized"]))
        random[game], human[game] = float(r["Random"]), float(r["Human"])
    algorithms = sorted({a for a, _ in cells})
    games = sorted(random)
    hns = np.full((len(algorithms), len(games)), np.nan)
    for (a, g), v in cells.items():
        hns[algorithms.index(a), games.index(g)] = float(np.mean(v))
    dups = sum(len(v) - 1 for v in cells.values())
    return PublishedScores(algorithms, games, hns, random, human,
                           hashlib.sha256(data).hexdigest(), rows, dups)


# ---------------------------------------------------------------- least squares

def least_squares(x: np.ndarray, y: np.ndarray, intercept: bool
                  ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """(coefficients, intercept, residuals, LOO residuals) of y ~ x.

    LOO residuals by the hat-matrix identity e_i / (1 - h_ii): exactly the residual of
    algorithm i under the fit on all the others.
    """
    a = np.asarray(x, dtype=np.float64)
    a = np.column_stack([np.ones(len(a)), a]) if intercept else a
    y = np.asarray(y, dtype=np.float64)
    if len(y) <= a.shape[1]:
        raise AnalysisError(f"{len(y)} algorithms cannot fit {a.shape[1]} coefficients")
    beta, *_ = np.linalg.lstsq(a, y, rcond=None)
    resid = y - a @ beta
    hat = np.einsum("ij,ji->i", a, np.linalg.pinv(a.T @ a) @ a.T)
    loo = resid / (1.0 - hat)
    coef = beta[1:] if intercept else beta
    return coef, float(beta[0]) if intercept else 0.0, resid, loo


def choose_intercept(x: np.ndarray, y: np.ndarray) -> tuple[bool, dict[str, float]]:
    """Intercept only if it lowers the LOO mean squared error; both MSEs returned."""
    mse = {name: float(np.mean(least_squares(x, y, icpt)[3] ** 2))
           for name, icpt in (("without_intercept", False), ("with_intercept", True))}
    return mse["with_intercept"] < mse["without_intercept"], mse


def training_set(scores: PublishedScores, env_ids: Sequence[str], min_games: int = MIN_GAMES
                 ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(algorithms, x = z of the subset's games, y = z of the median, games counted) of
    the algorithms with every game of the subset and >= min_games of the 57."""
    missing = [e for e in env_ids if dataset_game(e) not in scores.games]
    if missing:
        raise AnalysisError(f"the dataset has no scores for {missing}")
    cols = scores.hns_percent[:, [scores.games.index(dataset_game(e)) for e in env_ids]]
    count = scores.games_per_algorithm()
    keep = np.isfinite(cols).all(axis=1) & (count >= min_games)
    algos = [a for a, k in zip(scores.algorithms, keep, strict=True) if k]
    # the median HNS% over the games each algorithm has
    median = np.nanmedian(scores.hns_percent, axis=1)
    return algos, transform(cols[keep]), transform(median[keep]), count[keep]


# ---------------------------------------------------------------- the model

@dataclass(frozen=True)
class Atari5Model:
    """A fitted subset model: z(median) = intercept + coefficients . z(games)."""

    subset: str  # "atari5" or "atari3"
    env_ids: tuple[str, ...]
    coefficients: tuple[float, ...]
    intercept: float
    uses_intercept: bool
    random: tuple[float, ...]  # the dataset's reference scores, per game (model inputs)
    human: tuple[float, ...]
    algorithms: tuple[str, ...]  # training set
    loo_residuals: tuple[float, ...]  # log10 units, per training algorithm
    residual_rmse: float  # in-sample, log10
    loo_mse: dict[str, float]  # LOO MSE with and without intercept (the choice)
    median_range_percent: tuple[float, float]  # the training algorithms' true medians
    min_games: int = MIN_GAMES

    @property
    def label(self) -> str:
        return LABELS[self.subset]

    @property
    def n(self) -> int:
        return len(self.algorithms)

    @property
    def dof(self) -> int:
        return self.n - len(self.coefficients) - int(self.uses_intercept)

    @property
    def loo_rmse(self) -> float:
        return float(np.sqrt(np.mean(np.square(self.loo_residuals))))

    @property
    def loo_mae(self) -> float:
        return float(np.mean(np.abs(self.loo_residuals)))

    @property
    def loo_median_ae(self) -> float:
        return float(np.median(np.abs(self.loo_residuals)))

    def hns_percent(self, raw) -> np.ndarray:
        """(..., games) raw scores -> HNS% with the model's own reference scores."""
        raw = np.asarray(raw, dtype=np.float64)
        lo, hi = np.asarray(self.random), np.asarray(self.human)
        return 100.0 * (raw - lo) / (hi - lo)

    def predict_log(self, hns_percent) -> np.ndarray:
        """(..., games) HNS% -> (...) estimated z of the 57-game median."""
        return transform(hns_percent) @ np.asarray(self.coefficients) + self.intercept

    def estimate_hns(self, raw) -> np.ndarray:
        """(..., games) raw scores -> (...) estimated 57-game median HNS (1.0 = human)."""
        return inverse_transform(self.predict_log(self.hns_percent(raw))) / 100.0

    def model_error_quantile(self, confidence: float) -> float:
        """Half-width (log10) of the model-error-only interval: t_{dof} x LOO RMSE."""
        return float(t_upper((1 - confidence) / 2, self.dof)) * self.loo_rmse

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(label=self.label, n_algorithms=self.n, dof=self.dof, loo_rmse=self.loo_rmse,
                 loo_mae=self.loo_mae, loo_median_ae=self.loo_median_ae,
                 loo_relative_error_percent=relative_error_percent(self.loo_mae),
                 loo_median_relative_error_percent=relative_error_percent(self.loo_median_ae))
        return d


def fit_model(scores: PublishedScores, subset: str = ATARI5, min_games: int = MIN_GAMES
              ) -> Atari5Model:
    """Least squares on the algorithms with all five (three) games and >= min_games of the
    57 (default: all 57, so targets are exact), intercept chosen by LOO MSE."""
    env_ids = _subset_games(subset)
    algos, x, y, _ = training_set(scores, env_ids, min_games)
    icpt, mse = choose_intercept(x, y)
    coef, b0, resid, loo = least_squares(x, y, icpt)
    games = [dataset_game(e) for e in env_ids]
    return Atari5Model(subset, tuple(env_ids), tuple(float(c) for c in coef), b0, icpt,
                       tuple(scores.random[g] for g in games),
                       tuple(scores.human[g] for g in games), tuple(algos),
                       tuple(float(v) for v in loo),
                       float(np.sqrt(np.mean(resid**2))), mse,
                       (float(inverse_transform(y.min())), float(inverse_transform(y.max()))),
                       min_games)


def _subset_games(subset: str) -> tuple[str, ...]:
    if subset not in SUBSETS:
        raise AnalysisError(f"unknown subset {subset!r}; valid: {sorted(SUBSETS)}")
    return SUBSETS[subset]


@lru_cache(maxsize=4)
def _stored(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise AnalysisError(f"{p}: no stored Atari-5 model; run python -m analysis.atari5.fit")
    return json.loads(p.read_text(encoding="utf-8"))


def load_model(subset: str = ATARI5, path: Path | str = MODEL_FILE) -> Atari5Model:
    """The stored model of `subset` ("atari5" or "atari3")."""
    _subset_games(subset)
    d = _stored(str(path))["models"][subset]
    kw: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v)
                          for k, v in d.items() if k in Atari5Model.__dataclass_fields__}
    kw["loo_mse"] = dict(d["loo_mse"])
    return Atari5Model(**kw)


# ---------------------------------------------------------------- validation

def holdout_coverage(x: np.ndarray, y: np.ndarray, levels: Sequence[float] = COVERAGE_LEVELS
                     ) -> dict[str, Any]:
    """Coverage of the model-error interval on algorithms held out one at a time.

    For each algorithm i: the model is refitted on the others (intercept chosen again),
    its own LOO RMSE and dof give the interval pred_i +- t x rmse, and we record whether
    it covers the true y_i. Nothing of algorithm i enters its interval.
    """
    n = len(y)
    hits = {lv: 0 for lv in levels}
    errors = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        icpt, _ = choose_intercept(x[keep], y[keep])
        coef, b0, _, loo = least_squares(x[keep], y[keep], icpt)
        pred = float(x[i] @ coef + b0)
        rmse = float(np.sqrt(np.mean(loo**2)))
        dof = n - 1 - x.shape[1] - int(icpt)
        errors[i] = y[i] - pred
        for lv in levels:
            hits[lv] += int(abs(errors[i]) <= t_upper((1 - lv) / 2, dof) * rmse)
    return {"n": n, "coverage": {f"{lv:g}": hits[lv] / n for lv in levels},
            "covered": {f"{lv:g}": hits[lv] for lv in levels},
            "relative_error_percent": relative_error_percent(np.mean(np.abs(errors)))}


def out_of_sample(model: Atari5Model, scores: PublishedScores,
                  min_games: int = PAPER_MIN_GAMES,
                  levels: Sequence[float] = COVERAGE_LEVELS) -> dict[str, Any]:
    """The model on the published algorithms it was NOT trained on (>= min_games of the
    57, all subset games): their median is over the games they have, so only close to the
    57-game one. Absolute errors (relative %) and interval coverage."""
    algos, x, y, count = training_set(scores, model.env_ids, min_games)
    new = np.array([a not in model.algorithms for a in algos])
    err = y[new] - (x[new] @ np.asarray(model.coefficients) + model.intercept)
    return {
        "n": int(new.sum()), "games": [int(c) for c in count[new]],
        "mae_relative_error_percent": relative_error_percent(np.mean(np.abs(err))),
        "median_relative_error_percent": relative_error_percent(np.median(np.abs(err))),
        "coverage": {f"{lv:g}": float(np.mean(np.abs(err) <= model.model_error_quantile(lv)))
                     for lv in levels},
    }


def fit_report(scores: PublishedScores) -> dict[str, Any]:
    """Everything analysis/data/atari5.json stores: both models, their validation, and
    the reproduction of the paper's own fit (>= 40 games)."""
    out: dict[str, Any] = {
        "made_by": "python -m analysis.atari5.fit",
        "dataset": {"file": "analysis/data/published/atari5/dataset.csv",
                    "sha256": scores.sha256, "rows": scores.rows,
                    "algorithms": len(scores.algorithms),
                    "duplicate_rows_averaged": scores.duplicates},
        "models": {}, "validation": {}, "paper_reproduction": {},
    }
    for subset in SUBSETS:
        model = fit_model(scores, subset)
        _, x, y, _ = training_set(scores, model.env_ids, model.min_games)
        out["models"][subset] = model.as_dict()
        out["validation"][subset] = {
            "holdout_coverage": holdout_coverage(x, y),
            "out_of_sample_partial_algorithms": out_of_sample(model, scores),
        }
        paper = fit_model(scores, subset, min_games=PAPER_MIN_GAMES)
        out["paper_reproduction"][subset] = {
            "min_games": PAPER_MIN_GAMES, "n_algorithms": paper.n,
            "uses_intercept": paper.uses_intercept,
            "coefficients": list(paper.coefficients),
            "paper_coefficients": list(PAPER[subset]["coefficients"]),
            "loo_relative_error_percent": relative_error_percent(paper.loo_mae),
            "paper_relative_error_percent": PAPER[subset]["relative_error_percent"],
        }
    return out
