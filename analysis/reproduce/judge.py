"""The per-game verdicts of `reproduce` and its headline, all games at once (vectorised
over simulated draws too: the calibration suite decides through `judge`), and the
descriptive power numbers beside them.

The rules (the moderated spread, the margin, Holm, COLLAPSED, PUBLISHED TOO NOISY, the
aggregate's TOST and the three headlines) and their measured error rates are in
docs/reproduce.md; the constants below are theirs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.errors import AnalysisError
from analysis.stats.moderated import holm_reject, moderated_variance
from analysis.stats.welch import (
    TOST_TAIL,
    WelchInterval,
    t_upper,
    tost_inside,
    tost_passes,
)
from analysis.verdicts.per_game import COLLAPSE_LEVEL, collapsed

CONSISTENT = "CONSISTENT"
HIGHER = "HIGHER"
LOWER = "LOWER"
INCONCLUSIVE = "INCONCLUSIVE"
NOT_LEARNED = "NOT LEARNED"
PUBLISHED_TOO_NOISY = "PUBLISHED TOO NOISY"
"""Not a verdict: said of a judged game whose published agent is not clearly above
random though beyond the smallest margin from it (judge)."""
COLLAPSED = "COLLAPSED"

REPRODUCED = "REPRODUCED"
NOT_REPRODUCED = "NOT REPRODUCED"
NOT_SHOWN = "NOT SHOWN"
AGGREGATE_MARGIN = 0.10
"""Aggregate equivalence margin: the weighted mean relative difference within +-10%."""

LEARNED_MIN_HNS = 0.01
LEARNED_T = 3.0
COLLAPSE_SHARE = 0.5
"""The margin never exceeds this share of the published score above random."""
ALPHA = 0.05
MAX_SEEDS_ADVICE = 100
ONE_SEED_REFUSAL = (
    "a game with one seed of yours has no spread of its own: it would borrow the "
    "published spread, and a faithful 57-game reproduction then fails about 17% of the "
    "time instead of 5%. Run >= 2 seeds per game (3 keep the rate), or vouch that your "
    "runs share the published spread with --assume-equal-spread")
POWER_SIMULATIONS = 5_000
"""Draws behind each P(consistent if equal): Monte Carlo sd <= 0.007."""


@dataclass
class Judgement:
    """Arrays (..., games) of the per-game statistics and verdicts."""

    verdict: np.ndarray
    diff: np.ndarray  # yours - published, HNS
    se: np.ndarray  # moderated se of diff, HNS
    df: np.ndarray
    p: np.ndarray  # two-sided, before Holm
    flagged: np.ndarray  # Holm rejection
    margin: np.ndarray
    learned: np.ndarray  # judged games: learned, or PUBLISHED TOO NOISY (noisy)
    seeds_needed: np.ndarray  # your seeds for a 90% half-width of margin / 2 (0: n/a)
    aggregate: np.ndarray  # (...) weighted mean relative difference over judged games
    aggregate_se: np.ndarray  # (...)
    aggregate_df: np.ndarray  # (...)
    aggregate_unit_var: np.ndarray  # (...) its variance x 1 / (1/n + 1/pub_n) (planning)
    noisy: np.ndarray  # judged games the published agent learned too noisily to be
    # clearly above random (PUBLISHED TOO NOISY: see judge)

    def ci(self, level: float) -> tuple[np.ndarray, np.ndarray]:
        h = t_upper((1 - level) / 2, self.df) * self.se
        return self.diff - h, self.diff + h


def judge(user_mean: np.ndarray, user_sd: np.ndarray, n_user: np.ndarray | int,
          pub_hns: np.ndarray, pub_sd: np.ndarray, pub_n: int, *, relative: float,
          absolute: float, alpha: float = ALPHA, assume_equal_spread: bool = False,
          user_max: np.ndarray | None = None, user_min: np.ndarray | None = None
          ) -> Judgement:
    """All games' verdicts: your mean and sd (ddof=1; NaN for one seed) of HNS per game
    with n_user seeds, the published HNS mean and sd (ddof=1) of pub_n seeds; arrays
    (..., games). user_max, user_min: your highest and lowest seed's HNS per game (the
    COLLAPSED rule; None: your mean, i.e. one seed)."""
    user_mean, user_sd, pub_hns, pub_sd = (np.asarray(x, dtype=np.float64)
                                           for x in (user_mean, user_sd, pub_hns, pub_sd))
    n = np.broadcast_to(np.asarray(n_user, dtype=np.float64), user_mean.shape)
    if np.any(n < 2) and not assume_equal_spread:
        raise AnalysisError(ONE_SEED_REFUSAL)
    learned = (pub_hns > LEARNED_MIN_HNS) & (pub_hns > LEARNED_T * (pub_sd / math.sqrt(pub_n)))
    # noisy: not clearly above random (not learned) although the mean is beyond the
    # smallest margin (`absolute` HNS) from it: the published seeds disagree (one learned,
    # one did not), not a failure to learn. Judged on their own spread.
    noisy = ~learned & (pub_hns > absolute)
    judged = learned | noisy
    with np.errstate(all="ignore"):
        # the scale: all seeds' mean (yours and the published), independent of the
        # difference under the null (the published mean alone, noisy, would inflate t
        # whenever it came out low by chance)
        scale = np.where(judged, (n * user_mean + pub_n * pub_hns) / (n + pub_n), np.nan)
        scale = np.where(scale > 0, scale, np.nan)
        su2 = np.where(n > 1, (user_sd / scale) ** 2, 0.0)
        sp2 = (pub_sd / scale) ** 2
        d = (n - 1) + (pub_n - 1)
        s2 = ((n - 1) * su2 + (pub_n - 1) * sp2) / d
        # the prior is fitted on the learned games only: a published-too-noisy game's
        # spread is not like the others' (it would widen every game's interval)
        s2_learned = np.where(learned, s2, np.nan)
        post, df, prior_s2 = moderated_variance(s2_learned, d)
        # never below the game's own variance nor the prior's: shrinking a truly noisy
        # game towards the prior would flag it by chance (measured: 7-13% family-wise
        # at 3 seeds), and so would a quiet game shrunk upwards from a lucky low s2
        post = np.fmax(post, s2)
        post = np.fmax(post, prior_s2)
        # a published-too-noisy game borrows nothing: its own spread (at least the
        # prior's) with its own df
        post = np.where(noisy, np.fmax(s2, prior_s2), post)
        df = np.where(noisy, np.broadcast_to(d, np.shape(post)), df)
        se = np.sqrt(post * (1 / n + 1 / pub_n)) * scale
        diff = user_mean - pub_hns
        p = np.where(judged, 2 * stats.t.sf(np.abs(diff / se), df), np.nan)
    flagged = holm_reject(p, alpha)
    h = np.abs(pub_hns)  # max(relative x HNS, min(absolute, COLLAPSE_SHARE x HNS))
    margin = np.maximum(relative * h, np.minimum(absolute, COLLAPSE_SHARE * h))
    consistent = judged & tost_inside(diff, se, df, margin)
    verdict = np.where(flagged, np.where(diff > 0, HIGHER, LOWER),
                       np.where(consistent, CONSISTENT, INCONCLUSIVE))
    gone = learned & collapsed(user_mean if user_max is None else user_max, pub_hns, pub_sd,
                               user_mean if user_min is None else user_min)
    verdict = np.where(gone, COLLAPSED, verdict)
    verdict = np.where(judged, verdict, NOT_LEARNED)
    with np.errstate(all="ignore"):
        # aggregate: precision-weighted mean relative difference (moderated variances,
        # both sides' noise in them)
        v = post * (1 / n + 1 / pub_n)
        weighed = judged & (v > 0) & np.isfinite(scale)  # a scale <= 0 has no relative
        w = np.where(weighed, 1 / v, 0.0)
        rel = np.where(weighed, diff / scale, 0.0)
        wsum = w.sum(axis=-1)
        agg = (w * rel).sum(axis=-1) / wsum
        agg_var = 1 / wsum
        a = w**2 * v / wsum[..., None] ** 2
        agg_df = a.sum(axis=-1) ** 2 / np.where(a > 0, a**2 / df, 0.0).sum(axis=-1)
        unit = (1 / n + 1 / pub_n).mean(axis=-1) if np.ndim(n) else 1 / n + 1 / pub_n
        agg_unit = agg_var / unit
        # your seeds n at which t * s~ * scale * sqrt(1/n + 1/pub_n) = margin / 2
        unit = (margin / 2 / (t_upper(TOST_TAIL, df) * np.sqrt(post) * scale)) ** 2 - 1 / pub_n
        need = np.where(unit > 0, np.ceil(1 / unit), np.inf)
    seeds = np.where(judged & (verdict == INCONCLUSIVE),
                     np.minimum(need, MAX_SEEDS_ADVICE + 1), 0)
    return Judgement(verdict, diff, se, df, p, flagged, margin, judged, seeds, agg,
                     np.sqrt(agg_var), agg_df, agg_unit, noisy)


def headline(j: Judgement, margin: float = AGGREGATE_MARGIN) -> np.ndarray:
    """The headline (...) of judgements (..., games): REPRODUCED, NOT REPRODUCED or NOT
    SHOWN (docs/reproduce.md). A faithful reproduction is NOT REPRODUCED at most ~5% of
    the time (Holm's family-wise 5%; COLLAPSED < 1%); a collapsed learned game always is."""
    v = np.asarray(j.verdict)
    failed = np.isin(v, (HIGHER, LOWER, COLLAPSED)).any(axis=-1)
    with np.errstate(invalid="ignore"):
        half = t_upper(TOST_TAIL, j.aggregate_df) * j.aggregate_se
        lo, hi = j.aggregate - half, j.aggregate + half
        failed = failed | (lo > margin) | (hi < -margin)
        shown = (lo > -margin) & (hi < margin)
    return np.where(failed, NOT_REPRODUCED, np.where(shown, REPRODUCED, NOT_SHOWN))


def game_notes(verdict: str, w: WelchInterval, margin: float, p: float, seeds: int,
               judged: int, *, noisy: bool = False, absolute: float = 0.1) -> list[str]:
    """Why a game got its verdict, in words. noisy: the published agent is not clearly
    above random on it although its mean is beyond the `absolute` margin from random
    (PUBLISHED TOO NOISY: judged on its own spread)."""
    if verdict == NOT_LEARNED:
        return [f"the published agent sits at the random score on this game (within "
                f"{absolute:g} HNS of it and not clearly above it): not judged, not in the "
                "headline"]
    out = [f"{PUBLISHED_TOO_NOISY}: the published seeds disagree (not clearly above the "
           f"random score, yet more than {absolute:g} HNS above it on average), so this "
           "game is judged on its own spread, borrowing none from the other games, and "
           "not by the COLLAPSED rule"] if noisy else []
    if verdict == COLLAPSED:
        return out + [f"every seed of yours is within {COLLAPSE_LEVEL:.0%} of the random "
                      "score where the published agent learned this game on every seed: "
                      "fails the headline"]
    if verdict in (HIGHER, LOWER):
        return out + [f"p = {p:.2g}, significant after Holm over {judged} judged games"]
    if verdict == CONSISTENT:
        if w.ci95[0] > 0 or w.ci95[1] < 0:
            return out + ["differs from the published score (95% CI excludes 0), but "
                          "inside the margin"]
        return out
    half = (w.ci90[1] - w.ci90[0]) / 2
    why = (f"INCONCLUSIVE: the 90% CI (half-width {half:.3f}) is wider than the margin "
           f"{margin:.3f} allows, and no difference is significant after Holm")
    if seeds < 0 or seeds > MAX_SEEDS_ADVICE:
        return out + [why + f"; a 90% half-width of half the margin is out of reach even "
                      f"with {MAX_SEEDS_ADVICE} of your seeds: the published side's own "
                      "seeds are too noisy at this margin"]
    return out + [why + f"; about {seeds} of your seeds would settle it at the published "
                  "spread (a 90% half-width of half the margin)"]


def power_consistent(sd: float, n_user: int, n_published: int, margin: float, *,
                     true_diff: float = 0.0, sims: int = POWER_SIMULATIONS,
                     seed: int = 0) -> float:
    """P(CONSISTENT) when the true difference is `true_diff` and both sides' seeds have
    sd `sd`: simulated draws decided by the verdicts' own vectorised TOST core
    (analysis.stats.welch.tost_passes, as the seed planner does); one user seed borrows
    the published spread (a prediction interval)."""
    if sd == 0:
        return float(abs(true_diff) < margin)
    mine, published = _draws(sd, n_user, n_published, true_diff, sims, seed)
    if n_user >= 2:
        return float(np.mean(tost_passes(mine, published, margin)))
    # One user seed: se from the published sd alone, df = n_published - 1.
    diff = mine[:, 0] - published.mean(axis=1)
    se = published.std(axis=1, ddof=1) * math.sqrt(1 + 1 / n_published)
    return float(np.mean(tost_inside(diff, se, np.asarray(n_published - 1), margin)))


def _draws(sd: float, n_user: int, n_published: int, true_diff: float, sims: int,
           seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' simulated seeds, as rng.normal(true_diff, sd) draws them. At a true
    difference of +0.0 (every verdict's power) a draw is 0.0 + sd * z, which is sd * z + 0.0
    whether or not the product is fused: the standard draws are the same for every game
    of a comparison, so they are drawn once."""
    if true_diff == 0 and math.copysign(1.0, true_diff) > 0 and sd > 0:
        z_mine, z_published = _standard_draws(sims, n_user, n_published, seed)
        return sd * z_mine + 0.0, sd * z_published + 0.0
    rng = np.random.Generator(np.random.PCG64(seed))
    return (rng.normal(true_diff, sd, (sims, n_user)),
            rng.normal(0.0, sd, (sims, n_published)))


@functools.lru_cache(maxsize=16)
def _standard_draws(sims: int, n_user: int, n_published: int, seed: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.Generator(np.random.PCG64(seed))
    mine, published = rng.standard_normal((sims, n_user)), rng.standard_normal(
        (sims, n_published))
    mine.flags.writeable = published.flags.writeable = False  # shared between calls
    return mine, published


def detectable_shift(sd: float, n_user: int, n_published: int, power: float = 0.8) -> float:
    """Smallest true |difference| flagged HIGHER/LOWER with probability `power` (normal
    approximation of the Welch test at 5% two-sided, df of equal spreads)."""
    if sd == 0:
        return 0.0
    n_a = max(n_user, 1)
    se = sd * math.sqrt(1 / n_a + 1 / n_published)
    df = (n_published - 1) if n_user == 1 else (n_user + n_published - 2)
    return float((t_upper(0.025, df) + t_upper(1 - power, df)) * se)
