"""Did it reproduce? A user's runs against a published `mean ± std` column, per game and
in aggregate.

The published tables (shipped: `cleanba:main_10CPU` ..., analysis.inputs.published_data)
give per game the mean and the std (ddof=0) of 3 seeds' final scores. The user's
per-seed finals (layout copies of one seed are ONE seed: averaged,
analysis.scoring.scores) are judged against them by analysis.reproduce.judge, and
their median and IQM HNS get stratified bootstrap CIs beside the published column's.

The tables were made under the paper's protocol (benchenv.ATARI_PROTOCOL) at 200M
frames: runs with another protocol or budget are refused (ProtocolMismatch, exit 2)
unless allowed, and then every line says "at N frames against 200M".
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.errors import AnalysisError
from analysis.inputs.load import DEFAULT_LAST_N, PublishedTable, RunSet, load_published_table
from analysis.inputs.protocol import (
    PAPER_FRAMES,
    check_frame_budget,
    check_paper_protocol,
)
from analysis.reproduce.judge import (
    AGGREGATE_MARGIN,
    COLLAPSED,
    CONSISTENT,
    HIGHER,
    INCONCLUSIVE,
    LOWER,
    NOT_LEARNED,
    NOT_REPRODUCED,
    NOT_SHOWN,
    PUBLISHED_TOO_NOISY,
    REPRODUCED,
    Judgement,
    detectable_shift,
    game_notes,
    headline,
    judge,
    power_consistent,
)
from analysis.scales.normalize import ATARI_RANDOM_HUMAN, atari_env_id, get_normaliser
from analysis.scoring.scores import SeedValues, collapse_seed_copies, scores_by_group
from analysis.scoring.tables import TableData
from analysis.stats.metrics import AGGREGATES, Interval, interval_estimates, iqm
from analysis.stats.welch import TOST_TAIL, WelchInterval, t_upper
from analysis.verdicts.per_game import COLLAPSE_LEVEL
from analysis.verdicts.seedplan import UNTIL_DECIDED, beyond_cap, reproduce_seeds_needed
from runrecord import Run
from runrecord.exits import verdict_exit
from runrecord.words import counted, signed

PUBLISHED_SEEDS = 3
"""Seeds behind every cell of the paper's tables (static/cleanba in vwxyzjn/cleanba)."""

DEFAULT_RELATIVE_MARGIN = 0.25
"""Per-game margin: a quarter of the published HNS (Pong at ~1.2 HNS: +-0.3 HNS) ..."""
DEFAULT_ABSOLUTE_MARGIN = 0.1
"""... but never below 0.1 HNS (games where agents stay near the random score)."""

VERDICTS = (CONSISTENT, HIGHER, LOWER, COLLAPSED, INCONCLUSIVE, NOT_LEARNED)


# ---------------------------------------------------------------- published column

@dataclass
class PublishedColumn:
    """One column of a published table: per game mean and std (ddof=0) of `n_seeds`."""

    table: Path
    column: str
    games: list[str]
    mean: np.ndarray
    std_ddof0: np.ndarray
    n_seeds: int = PUBLISHED_SEEDS

    @property
    def sd(self) -> np.ndarray:
        """Sample sd (ddof=1): the table's ddof=0 std x sqrt(n / (n - 1))."""
        return self.std_ddof0 * math.sqrt(self.n_seeds / (self.n_seeds - 1))

    def index(self, game: str) -> int:
        return self.games.index(game)


def published_column(table: PublishedTable | Path | str, column: str,
                     n_seeds: int = PUBLISHED_SEEDS) -> PublishedColumn:
    """The column named `column`; AnalysisError listing the table's columns otherwise."""
    t = table if isinstance(table, PublishedTable) else load_published_table(table)
    if column not in t.columns:
        close = difflib.get_close_matches(column, t.columns, n=3, cutoff=0.3)
        raise AnalysisError(
            f"{t.path}: no column {column!r}. Its columns are: "
            + "; ".join(repr(c) for c in t.columns)
            + (f". Did you mean {close[0]!r}?" if close else ""))
    j = t.columns.index(column)
    std = t.std[:, j]
    if np.isnan(std).any():
        missing = [g for g, s in zip(t.games, std, strict=True) if np.isnan(s)]
        raise AnalysisError(f"{t.path}: column {column!r} has no '± std' for {missing[:5]}: "
                            "a verdict needs the published spread")
    if n_seeds < 2:
        raise AnalysisError(f"published seeds must be >= 2, got {n_seeds}")
    return PublishedColumn(t.path, column, list(t.games), t.mean[:, j].copy(), std.copy(),
                           n_seeds)


def match_game(name: str, games: Sequence[str]) -> str:
    """The table's id of game `name` (Breakout, Breakout-v5, BreakoutNoFrameskip-v4);
    AnalysisError listing the nearest matches when the table has no such game."""
    gid = atari_env_id(name)
    if gid in games:
        return gid
    close = difflib.get_close_matches(gid, games, n=5, cutoff=0.5)
    raise AnalysisError(f"unknown game {name!r}: not in the published table"
                        + (f"; nearest matches: {', '.join(close)}" if close else
                           f" ({len(games)} games, e.g. {', '.join(games[:3])})"))


# ---------------------------------------------------------------- the user's runs

@dataclass
class UserScores:
    """The user's per-seed final raw scores per game (layout copies averaged per seed)."""

    system: str
    per_game: dict[str, SeedValues]
    warnings: list[str] = field(default_factory=list)


def user_scores(runs: Sequence[Run], games: Sequence[str], *, last_n: int = DEFAULT_LAST_N,
                only: Sequence[str] | None = None) -> UserScores:
    """Group the user's Atari runs per published game; one row per distinct seed.

    All runs must be of one (system, architecture): another system's runs are no
    replicates. `only`: game names to keep (unknown ones: AnalysisError with the nearest
    matches).
    """
    warnings: list[str] = []
    keep = {match_game(g, games) for g in only} if only else None
    families = sorted({(str(r.manifest.get("system")), str(r.manifest.get("architecture")))
                       for r in runs})
    if len(families) > 1:
        raise AnalysisError(
            f"the runs are of {len(families)} systems/architectures "
            f"{[' / '.join(f) for f in families]}: compare one at a time "
            "(--where system=NAME --where architecture=ARCH)")
    by_game: dict[str, list[Run]] = {}
    for r in runs:
        env = str(r.manifest.get("env_id"))
        gid = atari_env_id(env)
        if gid not in ATARI_RANDOM_HUMAN:
            warnings.append(f"run {r.run_id} ({env}) is not an Atari game: left out")
            continue
        if gid not in games:
            close = difflib.get_close_matches(gid, games, n=3, cutoff=0.5)
            warnings.append(f"run {r.run_id}: {env} is not in the published table: left out"
                            + (f" (nearest: {', '.join(close)})" if close else ""))
            continue
        if env != gid:  # one rule for env versions (analysis.inputs.load)
            warnings.append(f"run {r.run_id}: {env} is another version of the table's {gid}, "
                            f"a different task unless mapped (--env-map {env}={gid}): left out")
            continue
        if keep is not None and gid not in keep:
            continue
        by_game.setdefault(gid, []).append(r)
    if not by_game:
        raise AnalysisError("none of the runs is on a game of the published table"
                            + (f" ({'; '.join(warnings[:3])})" if warnings else ""))
    per_game: dict[str, SeedValues] = {}
    for gid in sorted(by_game):
        game_runs = by_game[gid]
        groups = scores_by_group(game_runs, "layout.name", last_n=last_n)
        for gs in groups.values():
            warnings += gs.warnings
        per_game[gid] = collapse_seed_copies(list(groups.values()), gid, attr="final_raw")
    return UserScores(" / ".join(families[0]), per_game, warnings)


# ---------------------------------------------------------------- the comparison

@dataclass
class GameResult:
    game: str
    published_mean: float  # raw score
    published_sd: float  # raw, ddof=1
    published_n: int
    seeds: list[int]
    copies: list[int]
    finals: list[float]  # raw, one per seed
    published_hns: float
    user_hns: float
    welch: WelchInterval  # HNS, user - published
    margin: float
    verdict: str
    power: float  # P(CONSISTENT) at true difference 0 with the published spread
    detectable: float  # HNS shift flagged with 80% power
    notes: list[str] = field(default_factory=list)
    noisy: bool = False  # PUBLISHED TOO NOISY (judged on its own spread; judge.judge)

    def as_dict(self) -> dict[str, Any]:
        w = self.welch
        return {"game": self.game, "published_mean": self.published_mean,
                "published_sd_ddof1": self.published_sd, "published_seeds": self.published_n,
                "seeds": self.seeds, "layout_copies": self.copies, "finals": self.finals,
                "published_hns": self.published_hns, "user_hns": self.user_hns,
                "diff_hns": w.diff, "ci90": list(w.ci90), "ci95": list(w.ci95), "df": w.df,
                "margin_hns": self.margin, "verdict": self.verdict,
                "power_consistent": self.power, "detectable_shift_hns": self.detectable,
                "published_too_noisy": self.noisy, "notes": self.notes}


@dataclass
class Aggregate:
    games: list[str]
    seeds: list[int]
    user: dict[str, Interval]  # median, iqm of the user's (seeds, games) HNS
    published_median: float
    published_iqm_of_means: float
    user_iqm_of_means: float
    reps: int

    def as_dict(self) -> dict[str, Any]:
        return {"games": self.games, "seeds": self.seeds, "reps": self.reps,
                "user": {k: v.as_dict() for k, v in self.user.items()},
                "published_median": self.published_median,
                "published_iqm_of_game_means": self.published_iqm_of_means,
                "user_iqm_of_game_means": self.user_iqm_of_means}


@dataclass
class ReproduceResult:
    published: PublishedColumn
    system: str
    games: list[GameResult]
    aggregate: Aggregate | None
    relative_margin: float
    absolute_margin: float
    budget_frames: float | None  # the user's frame budget (None: unknown)
    budget_text: str = ""  # '' at the paper's budget, else ' at 10M frames against 200M'
    warnings: list[str] = field(default_factory=list)
    headline: str = NOT_SHOWN  # REPRODUCED, NOT REPRODUCED or NOT SHOWN
    aggregate_diff: float = math.nan  # weighted mean relative difference, yours - published
    aggregate_ci90: tuple[float, float] = (math.nan, math.nan)
    aggregate_seeds: int | None = None  # your seeds that would show it (NOT SHOWN)
    strict: bool = False  # NOT SHOWN exits EXIT_FAILED

    @property
    def counts(self) -> dict[str, int]:
        return {v: sum(g.verdict == v for g in self.games) for v in VERDICTS}

    @property
    def seed_counts(self) -> str:
        """Your seed counts per game, e.g. '3' or '2/3' ('0' without a game)."""
        return "/".join(map(str, sorted({len(g.seeds) for g in self.games}))) or "0"

    @property
    def exit_code(self) -> int:
        return verdict_exit(self.headline == REPRODUCED, self.headline == NOT_REPRODUCED,
                            self.strict)

    def game_line(self, g: GameResult) -> str:
        w = g.welch
        seeds = "" if g.verdict == NOT_LEARNED else f" ({counted(len(g.seeds), 'seed')})"
        line = (f"{g.game}: {g.verdict}{self.budget_text}; yours {g.user_hns:.3f} HNS{seeds} "
                f"vs published {g.published_hns:.3f}")
        if g.verdict != NOT_LEARNED:
            line += (f" ({g.published_n} seeds); diff {signed(w.diff)} 90% CI "
                     f"[{signed(w.ci90[0])}, {signed(w.ci90[1])}], 95% CI "
                     f"[{signed(w.ci95[0])}, {signed(w.ci95[1])}]; margin {g.margin:.3f}")
        return line + "".join(f"; {n}" for n in g.notes)

    def table(self) -> TableData:
        rows = []
        for g in self.games:
            w = g.welch
            rows.append([
                g.game, f"{g.published_mean:.1f} ± {g.published_sd:.1f}", g.published_n,
                len(g.seeds), ", ".join(f"{s}: {v:.1f}" + (f" (x{c})" if c > 1 else "") for s, v, c
                                        in zip(g.seeds, g.finals, g.copies, strict=True)),
                f"{g.published_hns:.3f}", f"{g.user_hns:.3f}",
                f"{signed(w.diff)} [{signed(w.ci95[0])}, {signed(w.ci95[1])}]"
                if g.verdict != NOT_LEARNED else "n/a (not judged)",
                f"{g.margin:.3f}" if g.verdict != NOT_LEARNED else "n/a",
                f"{g.power:.0%}", g.verdict + (f" ({PUBLISHED_TOO_NOISY})" if g.noisy else "")
                + self.budget_text])
        return TableData(
            "reproduce_per_game",
            f"Yours ({self.system}) vs published '{self.published.column}' "
            f"({self.published.table.name}){self.budget_text}: raw final score per seed, "
            "HNS difference with its moderated 95% CI (spread shared across games), "
            "margin and verdict per game",
            ["game", "published mean ± sd (ddof=1)", "published seeds", "your seeds",
             "your finals (seed: score)", "published HNS", "your HNS",
             "diff HNS [95% CI]", "margin", "P(consistent if equal)", "verdict"], rows)

    def aggregate_lines(self) -> list[str]:
        a = self.aggregate
        if a is None:
            return []
        med, q = a.user["median"], a.user["iqm"]
        n = len(a.games)
        return [
            f"median HNS over your {counted(n, 'game')}{self.budget_text}: yours "
            f"{float(med.point):.3f} [95% CI {float(med.low):.3f}, {float(med.high):.3f}] "
            f"({len(a.seeds)} seeds, stratified bootstrap, {a.reps} reps) vs published "
            f"{a.published_median:.3f} on the same games",
            f"IQM HNS over your {counted(n, 'game')}{self.budget_text}: yours {float(q.point):.3f} "
            f"[95% CI {float(q.low):.3f}, {float(q.high):.3f}]; the table has no per-seed "
            f"scores, so the published side is the IQM of game means: published "
            f"{a.published_iqm_of_means:.3f} vs yours {a.user_iqm_of_means:.3f}",
            f"aggregate{self.budget_text}: descriptive only. The CIs cover your seeds' noise, not the "
            f"published value's own {self.published.n_seeds}-seed noise, and percentile "
            "bootstrap CIs are too narrow at 3 seeds; the per-game verdicts are the test",
        ]

    def summary_line(self) -> str:
        """The verdict: headline, why, per-game counts, the aggregate's estimate, 90% CI
        and margin, the seeds; how the aggregate is built is detail_lines'."""
        c = self.counts
        judged = len(self.games) - c[NOT_LEARNED]
        lo, hi = self.aggregate_ci90
        return (f"reproduce {self.system} vs '{self.published.column}'{self.budget_text}: "
                f"{self.headline}; {self.why()}. Per game: {c[CONSISTENT]} consistent, "
                f"{c[HIGHER]} higher, {c[LOWER]} lower, {c[COLLAPSED]} collapsed, "
                f"{c[INCONCLUSIVE]} inconclusive of {counted(judged, 'judged game')}. "
                f"Aggregate: yours - published {self.aggregate_diff:+.1%} of the published "
                f"score above random, 90% CI [{lo:+.1%}, {hi:+.1%}] vs "
                f"+-{AGGREGATE_MARGIN:.0%}; your seeds per game {self.seed_counts} vs "
                f"{self.published.n_seeds} published")

    def cells(self) -> dict[str, str]:
        """The verdict table's cells (the report): the aggregate's estimate and CI."""
        lo, hi = self.aggregate_ci90
        return {"estimate": f"{self.aggregate_diff:+.1%}", "ci": f"90%: [{lo:+.1%}, {hi:+.1%}]",
                "margin": f"±{AGGREGATE_MARGIN:.0%}",
                "seeds": f"{self.seed_counts} vs {self.published.n_seeds} published"}

    def detail_lines(self) -> list[str]:
        """What the summary line leaves out (--verbose, JSON "detail"): the games judged on
        their own spread or not judged, and how the aggregate is built."""
        c = self.counts
        return [f"judged games: {sum(g.noisy for g in self.games)} {PUBLISHED_TOO_NOISY} "
                f"(judged on their own spread); {c[NOT_LEARNED]} at random in the published "
                "agent (NOT LEARNED, not judged)",
                "aggregate: precision-weighted over the judged games, both sides' noise"]

    def why(self) -> str:
        """Why the headline is what it is, in words."""
        flagged = [g.game for g in self.games if g.verdict in (HIGHER, LOWER)]
        gone = [g.game for g in self.games if g.verdict == COLLAPSED]
        if self.headline == NOT_REPRODUCED:
            parts = []
            if gone:
                parts.append(f"COLLAPSED to the random score (every seed within "
                             f"{COLLAPSE_LEVEL:.0%} of it where the published agent learned "
                             f"it on every seed): {', '.join(gone)}")
            if flagged:
                parts.append(f"HIGHER/LOWER after Holm: {', '.join(flagged)}")
            if not parts:
                parts.append(f"the aggregate's 90% CI lies outside +-{AGGREGATE_MARGIN:.0%}")
            return "; ".join(parts)
        if self.headline == REPRODUCED:
            return (f"no game flagged or collapsed, and the aggregate's 90% CI lies inside "
                    f"+-{AGGREGATE_MARGIN:.0%} (equivalence shown, the published side's own "
                    f"{self.published.n_seeds}-seed noise in the test)")
        seeds = (f"about {self.aggregate_seeds} of your seeds per game would show it with "
                 f"80% power if you truly match (seed planner, at the spread seen; the "
                 f"published side stays at {self.published.n_seeds})"
                 if self.aggregate_seeds is not None else
                 f"{beyond_cap()} would be needed to show it at this spread")
        return (f"no game flagged or collapsed, but the aggregate's 90% CI is not inside "
                f"+-{AGGREGATE_MARGIN:.0%}: no failure shown, and no reproduction shown "
                f"either; {seeds}; {UNTIL_DECIDED}")

    def lines(self, verbose: bool = False) -> list[str]:
        """What `python -m analysis reproduce --published` prints: the table, a line per
        game, the aggregate lines, the summary (`verbose`: its detail) and the limits."""
        table = self.table()
        return [table.title, table.markdown(), *(self.game_line(g) for g in self.games),
                *self.aggregate_lines(), self.summary_line(),
                *(self.detail_lines() if verbose else []),
                *(f"note: {line}" for line in self.limits())]

    def limits(self) -> list[str]:
        """What the verdicts can and cannot conclude (printed under the table)."""
        n_pub = self.published.n_seeds
        powers = [g.power for g in self.games]
        strong = sum(p >= 0.8 for p in powers)
        return [
            f"each published cell is {n_pub} seeds: a game's verdict has at most "
            f"{n_pub} + your seeds behind it. CONSISTENT means the 90% CI of the difference "
            "lies inside the margin (TOST at 5%); it does not mean identical.",
            f"P(consistent if equal): if your system truly scored what the paper's did, with "
            f"the published spread and your seed count ({self.seed_counts}), the "
            f"chance of CONSISTENT. It is >= 80% on {strong} of {counted(len(powers), 'game')}; "
            "elsewhere INCONCLUSIVE is the expected answer even for a faithful "
            "reproduction: more of your seeds or a wider margin (--relative-margin) help; "
            "the published side stays at 3 seeds.",
            "HIGHER / LOWER: significant after Holm over the judged games, with each game's "
            "spread shared with the others' (moderated t): the chance that a faithful "
            "reproduction gets any flag is at most 5%. Only large shifts are flagged with "
            "3 published seeds (see 'detectable_shift_hns' in the JSON).",
        ]

    def as_dict(self) -> dict[str, Any]:
        return {"table": str(self.published.table), "column": self.published.column,
                "system": self.system, "published_seeds": self.published.n_seeds,
                "relative_margin": self.relative_margin,
                "absolute_margin": self.absolute_margin,
                "frames": self.budget_frames, "paper_frames": PAPER_FRAMES,
                "counts": self.counts, "summary": self.summary_line(),
                "detail": self.detail_lines(),
                "games": [g.as_dict() for g in self.games],
                "lines": [self.game_line(g) for g in self.games],
                "aggregate": self.aggregate.as_dict() if self.aggregate else None,
                "aggregate_lines": self.aggregate_lines(), "limits": self.limits(),
                "warnings": self.warnings}


def _frames(x: float) -> str:
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            v = x / scale
            return f"{v:.0f}{unit}" if v == round(v) else f"{v:.3g}{unit}"
    return f"{x:.0f}"


def compare_all(user: UserScores, pub: PublishedColumn, *, relative: float,
                absolute: float, assume_equal_spread: bool = False
                ) -> tuple[list[GameResult], Judgement]:
    """Every game's verdict at once (analysis.reproduce.judge: the moderated spread and
    Holm need all games), and the judgement behind them (its aggregate for the headline)."""
    games = sorted(user.per_game)
    rows = []
    for game in games:
        norm, j = get_normaliser(game), pub.index(game)
        hns = norm(user.per_game[game].values[:, 0])
        rows.append((float(np.mean(hns)), float(np.std(hns, ddof=1)) if len(hns) > 1
                     else math.nan, len(hns), float(norm(pub.mean[j])),
                     float(pub.sd[j] / abs(norm.high - norm.low)), float(np.max(hns)),
                     float(np.min(hns))))
    um, usd, n, ph, psd, umax, umin = (np.array(c) for c in zip(*rows, strict=True))
    jd = judge(um, usd, n.astype(int), ph, psd, pub.n_seeds, relative=relative,
               absolute=absolute, assume_equal_spread=assume_equal_spread, user_max=umax,
               user_min=umin)
    lo90, hi90 = jd.ci(0.90)
    lo95, hi95 = jd.ci(0.95)
    judged = int(jd.learned.sum())
    out = []
    for i, game in enumerate(games):
        values, j = user.per_game[game], pub.index(game)
        w = WelchInterval(float(jd.diff[i]), float(jd.se[i]), float(jd.df[i]),
                          (float(lo90[i]), float(hi90[i])), (float(lo95[i]), float(hi95[i])),
                          int(n[i]), pub.n_seeds, float(um[i]), float(ph[i]))
        verdict, margin = str(jd.verdict[i]), float(jd.margin[i])
        noisy = bool(jd.noisy[i])
        notes = game_notes(verdict, w, margin, float(jd.p[i]), int(jd.seeds_needed[i])
                           if np.isfinite(jd.seeds_needed[i]) else -1, judged, noisy=noisy,
                           absolute=absolute)
        if values.n_runs != values.n_seeds:
            notes.append(f"{values.n_runs} runs are {values.n_seeds} seeds (layout copies "
                         "averaged per seed)")
        out.append(GameResult(
            game, float(pub.mean[j]), float(pub.sd[j]), pub.n_seeds, list(values.seeds),
            list(values.copies), [float(v) for v in values.values[:, 0]], float(ph[i]),
            float(um[i]), w, margin, verdict,
            power_consistent(float(psd[i]), int(n[i]), pub.n_seeds, margin),
            detectable_shift(float(psd[i]), int(n[i]), pub.n_seeds), notes, noisy))
    return out, jd


def aggregate(user: UserScores, pub: PublishedColumn, *, reps: int, seed: int
              ) -> tuple[Aggregate | None, list[str]]:
    """Median and IQM HNS of the seeds that ran every compared game, with CIs."""
    games = sorted(user.per_game)
    common = sorted(set.intersection(*(set(v.seeds) for v in user.per_game.values())))
    if not common:
        return None, ["no seed ran every compared game: no aggregate (run the same seeds "
                      "on every game)"]
    warnings = []
    dropped = sorted({s for v in user.per_game.values() for s in v.seeds} - set(common))
    if dropped:
        warnings.append(f"aggregate: seeds {dropped} did not run every compared game and "
                        "are left out of the median/IQM (not of the per-game verdicts)")
    hns = np.array([[float(get_normaliser(g)(user.per_game[g].values[
        user.per_game[g].seeds.index(s), 0])) for g in games] for s in common])
    if len(common) == 1:
        warnings.append("aggregate: one seed: the bootstrap CI has no spread to resample")
    user_ci = interval_estimates(hns, {k: AGGREGATES[k] for k in ("median", "iqm")},
                                 reps=reps, seed=seed)
    pub_hns = np.array([float(get_normaliser(g)(pub.mean[pub.index(g)])) for g in games])
    return Aggregate(games, common, user_ci, float(np.median(pub_hns)),
                     float(iqm(pub_hns[None, :])), float(iqm(hns.mean(0)[None, :])),
                     reps), warnings


def reproduce(
    runset: RunSet,
    published: PublishedColumn,
    *,
    games: Sequence[str] | None = None,
    relative_margin: float = DEFAULT_RELATIVE_MARGIN,
    absolute_margin: float = DEFAULT_ABSOLUTE_MARGIN,
    allow_protocol_mismatch: bool = False,
    allow_budget_mismatch: bool = False,
    last_n: int = DEFAULT_LAST_N,
    reps: int = 50_000,
    seed: int = 0,
    assume_equal_spread: bool = False,
    strict: bool = False,
) -> ReproduceResult:
    """Compare the runs of `runset` with `published`, game by game and in aggregate.

    Raises AnalysisError (ProtocolMismatch for the guard) before anything is computed
    when the input cannot be compared.
    """
    if relative_margin < 0 or absolute_margin <= 0:
        raise AnalysisError(f"margins: relative must be >= 0 and absolute > 0, got "
                            f"{relative_margin} and {absolute_margin}")
    if not runset.included:
        raise AnalysisError("no completed runs with episodes to compare")
    runs = runset.included
    warnings = list(runset.warnings)
    user = user_scores(runs, published.games, last_n=last_n, only=games)
    warnings += user.warnings
    chosen = [r for r in runs if str(r.manifest.get("env_id")) in user.per_game]
    warnings += check_paper_protocol(chosen, allow_mismatch=allow_protocol_mismatch)
    budget, budget_warnings = check_frame_budget(chosen, PAPER_FRAMES,
                                                 allow_mismatch=allow_budget_mismatch)
    warnings += budget_warnings
    results, jd = compare_all(user, published, relative=relative_margin,
                              absolute=absolute_margin,
                              assume_equal_spread=assume_equal_spread)
    agg, agg_warnings = aggregate(user, published, reps=reps, seed=seed)
    warnings += agg_warnings
    # '' when the budget matched the paper's, else ' at 10M frames against 200M'
    what = f"{_frames(budget)} frames" if budget is not None else "an unknown frame budget"
    against = f" at {what} against {_frames(PAPER_FRAMES)}" if budget_warnings else ""
    res = ReproduceResult(published, user.system, results, agg, relative_margin,
                          absolute_margin, budget, against, warnings, str(headline(jd)),
                          float(jd.aggregate), strict=strict)
    half = float(t_upper(TOST_TAIL, jd.aggregate_df) * jd.aggregate_se)
    res.aggregate_ci90 = (res.aggregate_diff - half, res.aggregate_diff + half)
    if res.headline == NOT_SHOWN:
        res.aggregate_seeds = reproduce_seeds_needed(float(jd.aggregate_unit_var),
                                                     AGGREGATE_MARGIN, published.n_seeds)
    return res
