"""The per-game verdicts of `reproduce`, all games at once (vectorised over simulated
draws too: the calibration suite decides through `judge`).

Per game, on the HNS scale (0 = random, 1 = human), your seeds against the published
mean ± sd of its seeds:
- NOT LEARNED: the published agent sits at the random score: it is not clearly above
  random (published HNS below LEARNED_MIN_HNS, or under LEARNED_T published standard
  errors) AND its mean is within the absolute margin (0.1 HNS by default, the smallest
  margin a game gets) of random. Not judged, left out of the headline.
- PUBLISHED TOO NOISY (`noisy_games`; not a verdict but said beside one): not clearly
  above random, yet its mean is beyond the absolute margin from it (Boxing at 5.5 HNS,
  Asterix at 8.7 in a Moolib column, where one published seed failed). Judged like the
  others, with its own spread (no borrowing from the prior, which is fitted on the
  learned games only, and its own df), in Holm and in the aggregate, but not by the
  COLLAPSED rule. Measured on every published column (docs/reproduce.md): judging them
  keeps a faithful reproduction's false NOT REPRODUCED at or below the rate with them
  left out (worst column 6.5% against 7.0%) and REPRODUCED as likely or more.
- The spread: on the scale relative to the published score above random (your HNS /
  published HNS; spreads are comparable across games there), each game's within-game
  variance (your seeds and the published seeds pooled) is shrunk towards a prior fitted
  across the judged games (a moderated t: analysis.stats.moderated), so a game's test
  has the prior's df added to its 2-4.
- The margin: max(relative x published HNS, min(absolute, COLLAPSE_SHARE x published
  HNS)). It never reaches the whole published score, so a collapse to the random score
  on a learned game can never be CONSISTENT.
- HIGHER / LOWER: the moderated two-sided p-value, Holm-corrected over the judged games.
  Holm controls the family-wise error (the chance that ANY game of a faithful
  reproduction is flagged stays <= 5%), which is what the headline needs: it says
  "reproduced" only when no game is flagged. Benjamini-Hochberg would flag more games
  when many move, but lets a faithful 57-game reproduction fail far more often.
- CONSISTENT: otherwise, when the 90% CI (moderated se) lies inside +-margin (TOST at
  5%); a 95% CI that excludes 0 is then said ("differs, inside the margin").
- INCONCLUSIVE: otherwise; the reason (interval wider than the margin) and the seeds of
  yours that would give an interval half-width of margin / 2 at the published spread.
- COLLAPSED: a judged game the published agent learned on every seed (mean over
  COLLAPSE_T of its per-seed sds above random) where every seed of yours sits at the
  random score, within COLLAPSE_LEVEL of the published score above random on either
  side (analysis.verdicts.per_game.collapsed, the gate's rule): the agent did not learn
  what the published one did.

The headline (`headline`), three outcomes:
- NOT REPRODUCED: evidence of a failure: a game HIGHER or LOWER after Holm, a COLLAPSED
  game, or the aggregate's 90% CI entirely outside +-AGGREGATE_MARGIN;
- REPRODUCED: positive evidence: none of those, and aggregate equivalence shown: the
  precision-weighted mean over the judged games of (yours - published) / the game's
  score above random has its 90% CI inside +-AGGREGATE_MARGIN (TOST at 5%), its
  variance made of both sides' (moderated) per-game variances, so the published side's
  own 3-seed noise is in the test;
- NOT SHOWN: otherwise (exit EXIT_UNDECIDED): "no game flagged" alone is absence of
  evidence, not evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from analysis.errors import AnalysisError
from analysis.stats.moderated import holm_reject, moderated_variance, prior_variance
from analysis.stats.welch import WelchInterval, t_quantile
from analysis.verdicts.per_game import COLLAPSE_LEVEL, collapsed

CONSISTENT = "CONSISTENT"
HIGHER = "HIGHER"
LOWER = "LOWER"
INCONCLUSIVE = "INCONCLUSIVE"
NOT_LEARNED = "NOT LEARNED"
PUBLISHED_TOO_NOISY = "PUBLISHED TOO NOISY"
"""Not a verdict: said of a judged game whose published agent is not clearly above
random though beyond the smallest margin from it (noisy_games)."""
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
    noisy: np.ndarray | None = None  # judged games the published agent learned too
    # noisily to be clearly above random (PUBLISHED TOO NOISY: noisy_games)

    def ci(self, level: float) -> tuple[np.ndarray, np.ndarray]:
        h = t_quantile(0.5 + level / 2, self.df) * self.se
        return self.diff - h, self.diff + h


def learned_games(pub_hns: np.ndarray, pub_sd_hns: np.ndarray, pub_n: int) -> np.ndarray:
    pub_hns = np.asarray(pub_hns, dtype=np.float64)
    se = np.asarray(pub_sd_hns, dtype=np.float64) / math.sqrt(pub_n)
    return (pub_hns > LEARNED_MIN_HNS) & (pub_hns > LEARNED_T * se)


def noisy_games(pub_hns: np.ndarray, learned: np.ndarray, absolute: float) -> np.ndarray:
    """Games the published agent is not clearly above random on (not `learned`) although
    its mean is beyond the smallest margin (`absolute` HNS) from it: its seeds disagree
    (one learned, one did not), not a failure to learn. Judged on their own spread."""
    return ~np.asarray(learned) & (np.asarray(pub_hns, dtype=np.float64) > absolute)


def margins(pub_hns: np.ndarray | float, relative: float, absolute: float) -> np.ndarray:
    """max(relative x HNS, min(absolute, COLLAPSE_SHARE x HNS)) for published HNS > 0."""
    h = np.abs(np.asarray(pub_hns, dtype=np.float64))
    return np.maximum(relative * h, np.minimum(absolute, COLLAPSE_SHARE * h))


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
    learned = learned_games(pub_hns, pub_sd, pub_n)
    noisy = noisy_games(pub_hns, learned, absolute)
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
        post, df = moderated_variance(s2_learned, d)
        prior_s2 = prior_variance(s2_learned, d)[..., None]
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
    margin = margins(pub_hns, relative, absolute)
    h90 = t_quantile(0.95, df) * se
    consistent = judged & (-margin < diff - h90) & (diff + h90 < margin)
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
    with np.errstate(all="ignore"):
        # your seeds n at which t * s~ * scale * sqrt(1/n + 1/pub_n) = margin / 2
        unit = (margin / 2 / (t_quantile(0.95, df) * np.sqrt(post) * scale)) ** 2 - 1 / pub_n
        need = np.where(unit > 0, np.ceil(1 / unit), np.inf)
    seeds = np.where(judged & (verdict == INCONCLUSIVE),
                     np.minimum(need, MAX_SEEDS_ADVICE + 1), 0)
    return Judgement(verdict, diff, se, df, p, flagged, margin, judged, seeds, agg,
                     np.sqrt(agg_var), agg_df, agg_unit, noisy)


def headline(j: Judgement, margin: float = AGGREGATE_MARGIN) -> np.ndarray:
    """The headline (...) of judgements (..., games): REPRODUCED, NOT REPRODUCED or NOT
    SHOWN (module docstring). A faithful reproduction is NOT REPRODUCED at most ~5% of
    the time (Holm's family-wise 5%; COLLAPSED < 1%); a collapsed learned game always is."""
    v = np.asarray(j.verdict)
    failed = np.isin(v, (HIGHER, LOWER, COLLAPSED)).any(axis=-1)
    with np.errstate(invalid="ignore"):
        half = t_quantile(0.95, j.aggregate_df) * j.aggregate_se
        lo, hi = j.aggregate - half, j.aggregate + half
        failed = failed | (lo > margin) | (hi < -margin)
        shown = (lo > -margin) & (hi < margin)
    return np.where(failed, NOT_REPRODUCED, np.where(shown, REPRODUCED, NOT_SHOWN))


def reproduced(verdicts: np.ndarray) -> np.ndarray:
    """No judged game HIGHER, LOWER or COLLAPSED (..., games) -> bool (...): the part of
    the headline that needs evidence of a failure (`headline` adds the aggregate)."""
    v = np.asarray(verdicts)
    return np.asarray(~np.isin(v, (HIGHER, LOWER, COLLAPSED)).any(axis=-1))


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
