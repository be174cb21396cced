"""Atari-5 estimates from runs and published tables, with the model (analysis.atari5.model)
and a stratified bootstrap over seeds; see docs/atari5.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from analysis.atari5.model import (
    ATARI5,
    DEFAULT_CONFIDENCE,
    DEFAULT_REPS,
    Atari5Model,
    inverse_transform,
    load_model,
    relative_error_percent,
    transform,
)
from analysis.errors import AnalysisError
from analysis.inputs.load import load_published_table
from analysis.inputs.protocol import (
    ProtocolMismatch,
    check_same_protocol,
    describe_differences,
    protocol_differences,
    run_protocol,
)
from analysis.scales.normalize import atari_env_id, get_normaliser
from analysis.scoring.grouping import Analysis, manifest_family
from analysis.scoring.scores import GroupScores, SeedValues, collapse_seed_copies
from analysis.scoring.tables import TableData, median_hns
from analysis.stats.metrics import replicates
from runrecord.words import counted

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
                f"{counted(self.n_seeds, 'seed')}{extra}")

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
    picked = []
    for g in groups:  # a view with only the model's games: groups that ran more then pool
        cols = subset_columns(g.tasks, model, g.group)
        picked.append(replace(
            g, tasks=[g.tasks[j] for j in cols], final=g.final[:, cols],
            final_raw=g.final_raw[:, cols], curves=g.curves[:, cols],
            time_curves=g.time_curves[:, cols], wall_time_s=g.wall_time_s[:, cols]))
    return estimate_from_seeds(collapse_seed_copies(picked, label, attr="final_raw"), model,
                               confidence=confidence, reps=reps, seed=seed)


def check_group_protocol(gs: GroupScores, allow_mismatch: bool = False) -> list[str]:
    """A group must not mix env protocols: not across seeds of a game
    (analysis.inputs.protocol.check_same_protocol), and not across its games either, since the
    model combines them into one number. ProtocolMismatch unless allow_mismatch (then the
    differences come back as warnings)."""
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
        family = " / ".join(map(str, manifest_family(gs)))
        units.setdefault(family if pool_layouts else g, []).append(gs)
    if pool_layouts:
        for gss in units.values():
            warnings += check_same_protocol(
                {gs.group: list(gs.runs.values()) for gs in gss},
                allow_mismatch=allow_protocol_mismatch)
    return [estimate_groups(gss, label, model, confidence=confidence, reps=reps, seed=seed)
            for label, gss in units.items()], warnings


def estimate_analysis(a: Analysis, *, subset: str = ATARI5, **options: Any
                      ) -> tuple[list[Atari5Estimate], list[str]]:
    """estimate_suite (`options`: its own) on the Atari suite of an analysis;
    AnalysisError when it has none."""
    if "Atari" not in a.suite_names:
        model = load_model(subset)
        raise AnalysisError(f"no Atari runs among the inputs (suites: {a.suite_names}); "
                            f"{model.label} needs {', '.join(model.env_ids)}")
    return estimate_suite(a.suites[a.suite_names.index("Atari")], subset=subset, **options)


def estimate_lines(estimates: Sequence[Atari5Estimate], model: Atari5Model) -> list[str]:
    """Each estimate's line and notes, the per-game table and the model's provenance."""
    out = []
    for e in estimates:
        out += [e.line(), *(f"note: {n}" for n in e.notes)]
    rows = [[e.label, g, f"{raw:.1f}", f"{100 * h:.1f}%"]  # means over seeds
            for e in estimates
            for g, raw, h in zip(e.games, e.per_game_raw, e.per_game_hns, strict=True)]
    table = TableData("atari5_per_game", "per-game final scores (mean over seeds)",
                      ["group", "game", "raw score", "HNS"], rows)
    return [*out, table.markdown(),
            f"model: {model.label}, fitted on {model.n} published algorithms with all 57 "
            f"games; leave-one-out error {relative_error_percent(model.loo_mae):.1f}% "
            "(mean), see docs/atari5.md"]


# ---------------------------------------------------------------- published tables

def estimate_published_table(path: Path | str, model: Atari5Model | None = None
                             ) -> list[dict[str, Any]]:
    """Per column of a published `mean ± std` table (e.g. main_10CPU.csv): the estimate
    from the five games' means, its model-error interval (no per-seed data: model error
    only), and the table's own median HNS over its games (DQN Zoo references)."""
    model = model or load_model(ATARI5)
    table = load_published_table(path)
    cols = subset_columns(table.games, model, str(path))
    z = model.predict_log(model.hns_percent(table.mean[cols].T))
    half = model.model_error_quantile(DEFAULT_CONFIDENCE)
    measured = median_hns(table)
    return [{"column": c, "estimate": float(inverse_transform(zz) / 100),
             "low": float(inverse_transform(zz - half) / 100),
             "high": float(inverse_transform(zz + half) / 100), "median": float(m),
             "games": len(table.games),
             "log_error": float(transform(100 * m) - zz),
             "within_model_error": bool(abs(float(transform(100 * m) - zz)) <= half)}
            for c, zz, m in zip(table.columns, z, measured, strict=True)]


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
