"""Atari-5: the 57-game median human-normalised score (HNS) estimated from five games.

Method (Aitchison, Sweetser and Hutter, "Atari-5: Distilling the Arcade Learning
Environment down to Five Games", ICML 2023, arXiv 2210.02019), refitted here on their
published dataset (../shared/published-scores/atari5-dataset.csv) by
`python -m analysis.atari5_fit`, which stores the model in analysis/data/atari5.json:

- transform: z = log10(1 + max(HNS%, 0)) of each game's score (HNS in percent);
- target: z of the algorithm's median HNS% over the 57 games;
- least squares of the target on the five games' z, on the published algorithms that
  have all 57 games (so the target is the exact 57-game median), with an intercept only
  when it lowers the leave-one-algorithm-out (LOO) mean squared error;
- model error: the LOO residuals (each algorithm predicted by the fit on the others).

Estimate for a group of runs: the model applied to the per-game mean over seeds of the
final raw score (normalised with the dataset's own random/human references, the ones the
model was fitted with). Interval: each replicate of a stratified bootstrap over seeds
(analysis.bootstrap; layout copies of a seed first averaged into one row,
analysis.replicates) gives a log estimate, to which an independent draw of model error is
added: Student t with n - p degrees of freedom scaled by the LOO root mean squared error
(n algorithms, p coefficients). The percentiles of the sums, mapped back to HNS, are the
interval. With one seed it is the model error alone.

Atari-3 (BattleZone, NameThisGame, Phoenix; the paper's development subset) is fitted the
same way and always labelled as such: its error is larger.

Everything here is a pure function of arrays, the stored model, or GroupScores; reading
the CSV/JSON is at the edges (read_dataset, load_model).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from analysis.bootstrap import replicates
from analysis.errors import AnalysisError
from analysis.normalize import atari_env_id, get_normaliser
from analysis.replicates import SeedValues, collapse_seed_copies
from analysis.scores import GroupScores
from analysis.tables import TableData

ATARI5 = "atari5"
ATARI3 = "atari3"
SUBSETS: dict[str, tuple[str, ...]] = {
    ATARI5: ("BattleZone-v5", "DoubleDunk-v5", "NameThisGame-v5", "Phoenix-v5", "Qbert-v5"),
    ATARI3: ("BattleZone-v5", "NameThisGame-v5", "Phoenix-v5"),
}
LABELS = {ATARI5: "Atari-5", ATARI3: "Atari-3 (development subset: larger error)"}

MODEL_FILE = Path(__file__).with_name("data") / "atari5.json"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATASET = PROJECT_ROOT.parent / "shared" / "published-scores" / "atari5-dataset.csv"
"""The paper's dataset; it stays in shared/ (../shared/... from the project root)."""

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

    def median_percent(self) -> np.ndarray:
        """(algorithms,) median HNS% over the games each algorithm has."""
        return np.nanmedian(self.hns_percent, axis=1)

    def columns(self, env_ids: Sequence[str]) -> np.ndarray:
        """(algorithms, len(env_ids)) HNS% of those games."""
        missing = [e for e in env_ids if dataset_game(e) not in self.games]
        if missing:
            raise AnalysisError(f"the dataset has no scores for {missing}")
        return self.hns_percent[:, [self.games.index(dataset_game(e)) for e in env_ids]]


def read_dataset(path: Path | str = DATASET) -> PublishedScores:
    """Read the paper's dataset.csv (columns Algorithm, Game, Normalized, Random, Human,
    In57). Rows outside the 57 games are ignored; a pair published twice is averaged."""
    path = Path(path)
    if not path.exists():
        raise AnalysisError(f"{path}: no such file (the Atari-5 dataset, see "
                            "../shared/published-scores/README.md)")
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

def _design(x: np.ndarray, intercept: bool) -> np.ndarray:
    return np.column_stack([np.ones(len(x)), x]) if intercept else x


def least_squares(x: np.ndarray, y: np.ndarray, intercept: bool
                  ) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """(coefficients, intercept, residuals, LOO residuals) of y ~ x.

    LOO residuals by the hat-matrix identity e_i / (1 - h_ii): exactly the residual of
    algorithm i under the fit on all the others.
    """
    a = _design(np.asarray(x, dtype=np.float64), intercept)
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
    cols = scores.columns(env_ids)
    count = scores.games_per_algorithm()
    keep = np.isfinite(cols).all(axis=1) & (count >= min_games)
    algos = [a for a, k in zip(scores.algorithms, keep, strict=True) if k]
    return algos, transform(cols[keep]), transform(scores.median_percent()[keep]), count[keep]


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
        return float(stats.t.ppf(0.5 + confidence / 2, self.dof)) * self.loo_rmse

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


def model_from_dict(d: Mapping[str, Any]) -> Atari5Model:
    names = Atari5Model.__dataclass_fields__
    kw: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v)
                          for k, v in d.items() if k in names}
    kw["loo_mse"] = dict(d["loo_mse"])
    return Atari5Model(**kw)


def _subset_games(subset: str) -> tuple[str, ...]:
    if subset not in SUBSETS:
        raise AnalysisError(f"unknown subset {subset!r}; valid: {sorted(SUBSETS)}")
    return SUBSETS[subset]


@lru_cache(maxsize=4)
def _stored(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise AnalysisError(f"{p}: no stored Atari-5 model; run python -m analysis.atari5_fit")
    return json.loads(p.read_text(encoding="utf-8"))


def load_model(subset: str = ATARI5, path: Path | str = MODEL_FILE) -> Atari5Model:
    """The stored model of `subset` ("atari5" or "atari3")."""
    _subset_games(subset)
    return model_from_dict(_stored(str(path))["models"][subset])


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
            hits[lv] += int(abs(errors[i]) <= stats.t.ppf(0.5 + lv / 2, dof) * rmse)
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
        "made_by": "python -m analysis.atari5_fit",
        "dataset": {"file": "../shared/published-scores/atari5-dataset.csv",
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


# ---------------------------------------------------------------- estimates from runs

def subset_columns(tasks: Sequence[str], model: Atari5Model, label: str) -> list[int]:
    """Indices of the model's games in `tasks`; AnalysisError naming any missing game."""
    canon = [atari_env_id(t) for t in tasks]
    missing = [e for e in model.env_ids if e not in canon]
    if missing:
        raise AnalysisError(
            f"{label}: {model.label} needs {', '.join(model.env_ids)}; missing: "
            f"{', '.join(missing)} (the group has {', '.join(tasks) or 'no game'})")
    return [canon.index(e) for e in model.env_ids]


def per_seed_estimate(raw: np.ndarray, tasks: Sequence[str], model: Atari5Model | None = None,
                      label: str = "group") -> np.ndarray:
    """(seeds, tasks) raw final scores -> (seeds,) estimated 57-game median HNS of each
    seed (1.0 = human): the per-seed value of `--metric atari5-median`."""
    model = model or load_model(ATARI5)
    raw = np.asarray(raw, dtype=np.float64)
    return model.estimate_hns(raw[:, subset_columns(tasks, model, label)])


def per_seed_from_normalised(values: np.ndarray, tasks: Sequence[str],
                             subset: str = ATARI5) -> np.ndarray:
    """The verdicts' SeedMetric for `--metric atari5-median` (analysis.verdicts.
    SEED_METRICS): (seeds, tasks) normalised scores (HNS, 1.0 = human, DQN Zoo references)
    -> (seeds,) each seed's estimated 57-game median HNS. Scores are mapped back to raw
    (HNS is linear in the score) and renormalised with the model's own references."""
    model = load_model(subset)
    cols = subset_columns(tasks, model, f"--metric {subset}-median")
    values = np.asarray(values, dtype=np.float64)
    norms = [get_normaliser(tasks[j]) for j in cols]
    raw = np.stack([n.low + values[:, j] * (n.high - n.low)
                    for n, j in zip(norms, cols, strict=True)], axis=1)
    return model.estimate_hns(raw)


@dataclass
class Atari5Estimate:
    """The estimated 57-game median HNS of one group, with its interval (HNS, 1.0 = human)."""

    label: str
    subset: str
    model_label: str
    point: float
    low: float
    high: float
    confidence: float
    seed_low: float  # the interval from seed uncertainty alone
    seed_high: float
    model_relative_error_percent: float  # LOO MAE of the model, as a relative error
    games: list[str]
    per_game_raw: list[float]  # mean over seeds
    per_game_hns: list[float]  # mean over seeds, 1.0 = human
    seeds: list[int]
    copies: list[int]
    reps: int
    bootstrap_seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    def line(self) -> str:
        c = self.confidence
        runs = sum(self.copies)
        extra = f" ({runs} runs: layout copies averaged per seed)" if runs != self.n_seeds else ""
        return (f"{self.model_label} {self.label}: estimated 57-game median HNS "
                f"{100 * self.point:.1f}% [{100 * self.low:.1f}%, {100 * self.high:.1f}%] "
                f"({c:.0%} interval: seeds and model error; seeds alone "
                f"[{100 * self.seed_low:.1f}%, {100 * self.seed_high:.1f}%]); "
                f"{self.n_seeds} seed{'s' if self.n_seeds != 1 else ''}{extra}")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["line"] = self.line()
        return d


def estimate_from_seeds(values: SeedValues, model: Atari5Model, *,
                        confidence: float = DEFAULT_CONFIDENCE, reps: int = DEFAULT_REPS,
                        seed: int = 0) -> Atari5Estimate:
    """Estimate and interval from one row of raw final scores per seed (values.values:
    (seeds, tasks) RAW scores, e.g. collapse_seed_copies(..., attr="final_raw"))."""
    if not 0 < confidence < 1:
        raise AnalysisError(f"confidence must be in (0, 1), got {confidence}")
    if reps < 100:
        raise AnalysisError(f"reps must be >= 100 for a {confidence:.0%} interval, got {reps}")
    cols = subset_columns(values.tasks, model, values.label)
    raw = np.asarray(values.values, dtype=np.float64)[:, cols]
    if not np.all(np.isfinite(raw)):
        raise AnalysisError(f"{values.label}: non-finite final scores on {model.label} games")

    def log_estimate(sample: np.ndarray) -> np.ndarray:  # (..., seeds, games) -> (...)
        return model.predict_log(model.hns_percent(sample.mean(axis=-2)))

    boot = replicates(raw, {"z": log_estimate}, reps=reps, seed=seed)["z"]
    # Model error: an independent stream (the bootstrap's generator jumped ahead).
    rng = np.random.Generator(np.random.PCG64(seed).jumped())
    total = boot + rng.standard_t(model.dof, size=reps) * model.loo_rmse
    alpha = 1.0 - confidence
    q = [100 * alpha / 2, 100 * (1 - alpha / 2)]
    lo, hi = inverse_transform(np.percentile(total, q)) / 100.0
    slo, shi = inverse_transform(np.percentile(boot, q)) / 100.0
    point = float(inverse_transform(log_estimate(raw)) / 100.0)
    notes = []
    if values.n_seeds < 2:
        notes.append("1 seed: no seed uncertainty estimate; the interval is model error only")
    elif values.n_seeds < 5:
        notes.append(f"{values.n_seeds} seeds: the percentile bootstrap is too narrow at few "
                     "seeds (docs/analysis.md); the model error usually dominates")
    lo_range, hi_range = model.median_range_percent
    if not lo_range <= 100 * point <= hi_range:
        notes.append(f"extrapolation: the model was fitted on algorithms whose 57-game "
                     f"medians lie in {lo_range:.0f}%..{hi_range:.0f}% HNS; an estimate of "
                     f"{100 * point:.0f}% is outside that range, so its error may exceed the "
                     "stated interval")
    hns = model.hns_percent(raw.mean(axis=0)) / 100.0
    return Atari5Estimate(values.label, model.subset, model.label, point, float(lo), float(hi),
                          confidence, float(slo), float(shi),
                          relative_error_percent(model.loo_mae), list(model.env_ids),
                          [float(v) for v in raw.mean(axis=0)], [float(v) for v in hns],
                          list(values.seeds), list(values.copies), reps, seed, notes)


def estimate_groups(groups: Sequence[GroupScores], label: str, model: Atari5Model | None = None,
                    *, confidence: float = DEFAULT_CONFIDENCE, reps: int = DEFAULT_REPS,
                    seed: int = 0) -> Atari5Estimate:
    """The estimate of one group, or of several groups pooled (e.g. one system's layouts:
    runs of one seed on several layouts are copies, averaged into one row per seed)."""
    model = model or load_model(ATARI5)
    picked = [_only_games(g, model) for g in groups]
    return estimate_from_seeds(collapse_seed_copies(picked, label, attr="final_raw"), model,
                               confidence=confidence, reps=reps, seed=seed)


def _only_games(g: GroupScores, model: Atari5Model) -> GroupScores:
    """A view of g with only the model's games (groups that ran more games then pool)."""
    cols = subset_columns(g.tasks, model, g.group)
    return replace(g, tasks=[g.tasks[j] for j in cols], final=g.final[:, cols],
                   final_raw=g.final_raw[:, cols], curves=g.curves[:, cols],
                   time_curves=g.time_curves[:, cols], wall_time_s=g.wall_time_s[:, cols])


def check_group_protocol(gs: GroupScores, allow_mismatch: bool = False) -> list[str]:
    """A group must not mix env protocols: not across seeds of a game
    (analysis.protocol.check_same_protocol), and not across its games either, since the
    model combines them into one number. ProtocolMismatch unless allow_mismatch (then the
    differences come back as warnings)."""
    from analysis.protocol import (
        ProtocolMismatch,
        check_same_protocol,
        describe_differences,
        protocol_differences,
        run_protocol,
    )

    flag = "--allow-protocol-mismatch"
    warnings = check_same_protocol({gs.group: list(gs.runs.values())},
                                   allow_mismatch=allow_mismatch, flag=flag)
    first: dict[str, Any] = {}
    for (_, env), run in sorted(gs.runs.items()):
        first.setdefault(env, run)
    games = list(first)
    for env in games[1:]:
        a, b = first[games[0]], first[env]
        diffs = protocol_differences(run_protocol(a), run_protocol(b))
        if not diffs:
            continue
        text = (f"group {gs.group!r} mixes env protocols across its games: "
                + describe_differences(diffs, f"{games[0]}: {a.run_id}", f"{env}: {b.run_id}"))
        if not allow_mismatch:
            raise ProtocolMismatch(f"{text}. Pass {flag} to estimate it anyway (the output "
                                   "will say so).", list(diffs))
        warnings.append(f"WARNING (protocol mismatch allowed): {text}")
    return warnings


def _family(gs: GroupScores) -> str:
    run = next(iter(gs.runs.values()))
    return " / ".join(str(run.manifest.get(k)) for k in ("system", "architecture"))


def estimate_suite(suite: Mapping[str, GroupScores], *, subset: str = ATARI5,
                   pool_layouts: bool = False, allow_protocol_mismatch: bool = False,
                   confidence: float = DEFAULT_CONFIDENCE, reps: int = DEFAULT_REPS,
                   seed: int = 0) -> tuple[list[Atari5Estimate], list[str]]:
    """One estimate per group of a suite (or, with pool_layouts, per system/architecture,
    its layouts' copies of a seed averaged into one row). Raises AnalysisError naming the
    group and the missing game, or ProtocolMismatch when a group mixes env protocols."""
    model = load_model(subset)
    warnings: list[str] = []
    for gs in suite.values():
        subset_columns(gs.tasks, model, gs.group)
        warnings += check_group_protocol(gs, allow_protocol_mismatch)
    units: dict[str, list[GroupScores]] = {}
    for g, gs in suite.items():
        units.setdefault(_family(gs) if pool_layouts else g, []).append(gs)
    if pool_layouts:
        from analysis.protocol import check_same_protocol

        for gss in units.values():
            warnings += check_same_protocol(
                {gs.group: list(gs.runs.values()) for gs in gss},
                allow_mismatch=allow_protocol_mismatch)
    return [estimate_groups(gss, label, model, confidence=confidence, reps=reps, seed=seed)
            for label, gss in units.items()], warnings


def per_game_table(estimates: Sequence[Atari5Estimate]) -> TableData:
    """Per group and game: raw final score and HNS (means over seeds)."""
    rows = [[e.label, g, f"{raw:.1f}", f"{100 * h:.1f}%"]
            for e in estimates
            for g, raw, h in zip(e.games, e.per_game_raw, e.per_game_hns, strict=True)]
    return TableData("atari5_per_game", "per-game final scores (mean over seeds)",
                     ["group", "game", "raw score", "HNS"], rows)


# ---------------------------------------------------------------- published tables

def estimate_published_table(path: Path | str, model: Atari5Model | None = None
                             ) -> list[dict[str, Any]]:
    """Per column of a published `mean ± std` table (e.g. main_10CPU.csv): the estimate
    from the five games' means, its model-error interval (no per-seed data: model error
    only), and the table's own median HNS over its games (DQN Zoo references)."""
    from analysis.load import load_published_table
    from analysis.tables import median_hns

    model = model or load_model(ATARI5)
    table = load_published_table(path)
    cols = subset_columns(table.games, model, str(path))
    est = model.estimate_hns(table.mean[cols].T)
    z = model.predict_log(model.hns_percent(table.mean[cols].T))
    half = model.model_error_quantile(DEFAULT_CONFIDENCE)
    measured = median_hns(table)
    return [{"column": c, "estimate": float(e), "low": float(inverse_transform(zz - half) / 100),
             "high": float(inverse_transform(zz + half) / 100), "median": float(m),
             "games": len(table.games),
             "log_error": float(transform(100 * m) - zz),
             "within_model_error": bool(abs(float(transform(100 * m) - zz)) <= half)}
            for c, e, zz, m in zip(table.columns, est, z, measured, strict=True)]


def published_estimates_table(rows: Sequence[Mapping[str, Any]], model: Atari5Model
                              ) -> TableData:
    """estimate_published_table's rows as a table, estimate beside the measured median."""
    return TableData(
        "atari5_published", f"{model.label} estimate vs the table's own median HNS "
        f"({DEFAULT_CONFIDENCE:.0%} model-error interval; no per-seed data)",
        ["column", "estimate", "interval", f"median over {rows[0]['games'] if rows else 0} "
         "games", "within model error"],
        [[r["column"], f"{100 * r['estimate']:.1f}%",
          f"[{100 * r['low']:.1f}%, {100 * r['high']:.1f}%]", f"{100 * r['median']:.1f}%",
          "yes" if r["within_model_error"] else "NO"] for r in rows])


# ---------------------------------------------------------------- report section

def report_table(suite: Mapping[str, GroupScores], name: str = "atari5", *,
                 subset: str = ATARI5, reps: int = 2000, seed: int = 0,
                 confidence: float = DEFAULT_CONFIDENCE) -> tuple[TableData | None, list[str]]:
    """The report's Atari-5 section: one row per group, the estimate with its interval
    next to the five games' HNS (mean over seeds). None when no group of the suite ran
    any of the five games (not an Atari-5 sweep); groups lacking a game or mixing
    protocols get a warning instead of a row."""
    model = load_model(subset)
    wanted = set(model.env_ids)
    relevant = {g: gs for g, gs in suite.items()
                if wanted & {atari_env_id(t) for t in gs.tasks}}
    if not relevant:
        return None, []
    rows, warnings = [], []
    for g, gs in relevant.items():
        try:
            check_group_protocol(gs)
            e = estimate_groups([gs], g, model, confidence=confidence, reps=reps, seed=seed)
        except AnalysisError as err:
            warnings.append(f"no {model.label} estimate: {err}")
            continue
        warnings += [f"{model.label} {g}: {n}" for n in e.notes if n.startswith("extrapolation")]
        rows.append([g, e.n_seeds, f"{100 * e.point:.1f}%",
                     f"[{100 * e.low:.1f}%, {100 * e.high:.1f}%]",
                     *(f"{100 * v:.1f}%" for v in e.per_game_hns)])
    header = ["group", "seeds", f"{model.label} est. 57-game median HNS",
              f"{confidence:.0%} interval (seeds + model)",
              *(f"{e.split('-')[0]} HNS" for e in model.env_ids)]
    title = (f"{model.label}: estimated 57-game median HNS per group (model LOO error "
             f"{relative_error_percent(model.loo_mae):.1f}%, docs/atari5.md) next to the "
             f"per-game HNS (mean over seeds)")
    return (TableData(name, title, header, rows) if rows else None), warnings
