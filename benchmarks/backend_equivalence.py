"""Distributional equivalence of the two Atari backends under the paper's protocol: the
score distributions of one fixed policy (uniform random actions from a fixed stream) on
EnvPool and on ale-py's vector env (benchenv), per game and in aggregate, with the
project's equivalence verdict (Welch TOST: PASS / DIFFERENT / INCONCLUSIVE, at a margin
stated before the runs) and, for what is not PASS, the seeds per side that would decide it.

    python benchmarks/backend_equivalence.py                      # 5 games, 5 seeds per side
    python benchmarks/backend_equivalence.py --noop-max 30 --json out.json

A seed is one run: NUM_ENVS envs of the run seed (benchenv.env_seeds) stepped until
EPISODES episodes have ended; its value is their mean raw score, human-normalised (HNS).
The two sides use disjoint run seeds (EnvPool 1..n, ALE 1001..1000+n), so their samples are
independent: with the same seeds the backends replay the same games (tests/test_env_backends.py),
which the `paired` column checks on seed 1. The aggregate per seed is the IQM over games,
as the equivalence verdict of `python -m analysis equivalence` takes it.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchenv  # noqa: E402
from analysis.scales.normalize import get_normaliser  # noqa: E402
from analysis.stats.welch import TOST_TAIL, t_upper, welch_stats  # noqa: E402
from analysis.verdicts.equivalence import PASS, tost_decisions  # noqa: E402
from analysis.verdicts.seed_pairing import iqm_over_tasks  # noqa: E402
from analysis.verdicts.seedplan import equivalence_power, given_spread, seeds_needed  # noqa: E402
from runrecord.cli_help import parse_config  # noqa: E402
from runrecord.words import signed  # noqa: E402

GAMES = ("Breakout-v5", "Pong-v5", "SpaceInvaders-v5", "MsPacman-v5", "Qbert-v5")
NUM_ENVS = 8
EPISODES = 16
DELTA = 0.02
"""The margin, in HNS, fixed before the runs: an eighth of the agents' default (0.16). A
random policy scores near HNS 0 on every game, so the margin is what a backend may shift
the scores of a policy that does not learn; 2% of the human-random gap is far below what
separates agents (docs/cleanba.md)."""
ALE_SEED_OFFSET = 1000
MAX_STEPS = 200_000  # per env: a guard, never reached by random play on these games


def random_policy_scores(env_id: str, backend: str, seed: int, noop_max: int,
                         num_envs: int = NUM_ENVS, episodes: int = EPISODES) -> list[float]:
    """The first `episodes` raw game scores (by the step they ended, then env index) of
    uniform random play, actions drawn from a stream fixed by the run seed alone."""
    protocol = benchenv.env_protocol(env_id, backend=backend, noop_max=noop_max)
    env = benchenv.make_env(env_id, num_envs, seed, protocol=protocol)
    rng = np.random.default_rng([seed, 7])
    env.reset()
    returns = np.zeros(num_envs)
    resetting = np.zeros(num_envs, bool)  # next-step autoreset: that step is no episode's
    scores: list[float] = []
    try:
        for _ in range(MAX_STEPS):
            actions = rng.integers(0, 18, num_envs, dtype=np.int32)
            _, _, term, trunc, info = env.step(actions)
            returns += np.where(resetting, 0.0, info["reward"])
            done = (term | trunc) & ~resetting
            scores += [float(returns[i]) for i in np.flatnonzero(done)]
            returns[done] = 0.0
            resetting = term | trunc
            if len(scores) >= episodes:
                return scores[:episodes]
    finally:
        env.close()
    raise RuntimeError(f"{env_id}: fewer than {episodes} episodes in {MAX_STEPS} steps")


def verdict_row(a: np.ndarray, b: np.ndarray, delta: float) -> dict:
    """Welch TOST of a - b (per-seed values) with the project's verdict, and the seeds per
    side that would PASS 80% of the time at the observed spread."""
    diff, se, df = welch_stats(a, b)
    verdict = str(tost_decisions(diff[None], se[None], df[None], delta)[0])
    sd = float(np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2))
    needed = None
    if verdict != PASS:
        spread = given_spread(max(sd, 1e-12))
        needed = seeds_needed(lambda n: equivalence_power(spread, delta, n, sims=4000,
                                                          metrics=1), 0.8)
    half = float(t_upper(TOST_TAIL, df)) * float(se)
    return {"verdict": verdict, "diff": float(diff), "ci90": [float(diff) - half,
                                                              float(diff) + half],
            "mean_envpool": float(a.mean()), "mean_ale": float(b.mean()), "sd": sd,
            "seeds_needed_80": needed}


@dataclass
class EquivalenceConfig:
    """ALE against EnvPool: a uniform random policy's scores under the paper protocol,
    compared per game and over games by the equivalence verdict (three outcomes)."""

    games: tuple[str, ...] = GAMES
    """Atari games (EnvPool ids)."""
    seeds: int = 5
    """Run seeds per side (independent seed sets on the two sides)."""
    noop_max: int = int(benchenv.ATARI_PROTOCOL["noop_max"])
    """Random no-ops at reset (1: none; 30: the reset orders of the backends differ)."""
    delta: float = DELTA
    """Equivalence margin in HNS."""
    json: Path | None = None
    """Also write the rows here (JSON)."""


def main(argv: list[str] | None = None) -> int:
    args = parse_config(EquivalenceConfig, args=argv)
    for b in ("envpool", "ale"):
        benchenv.check_backend(b)
    t0 = time.monotonic()
    hns: dict[str, dict[str, np.ndarray]] = {"envpool": {}, "ale": {}}
    rows: dict[str, dict] = {}
    for game in args.games:
        raw = {"envpool": [random_policy_scores(game, "envpool", s, args.noop_max)
                           for s in range(1, args.seeds + 1)],
               "ale": [random_policy_scores(game, "ale", ALE_SEED_OFFSET + s, args.noop_max)
                       for s in range(1, args.seeds + 1)]}
        paired = random_policy_scores(game, "ale", 1, args.noop_max) == raw["envpool"][0]
        for b in hns:
            hns[b][game] = np.asarray(get_normaliser(game)(np.mean(raw[b], axis=1)), np.float64)
        rows[game] = {**verdict_row(hns["envpool"][game], hns["ale"][game], args.delta),
                      "raw_envpool": float(np.mean(raw["envpool"])),
                      "raw_ale": float(np.mean(raw["ale"])), "paired_identical": paired}
        print(f"{game}: {rows[game]['verdict']} ({time.monotonic() - t0:.0f}s)", flush=True)
    per_seed = {b: iqm_over_tasks(np.stack([hns[b][g] for g in args.games], axis=1),
                                  args.games) for b in hns}
    rows["IQM over games"] = verdict_row(np.asarray(per_seed["envpool"]),
                                         np.asarray(per_seed["ale"]), args.delta)
    print(f"\nrandom policy, noop_max={args.noop_max}, {args.seeds} seeds per side x "
          f"{NUM_ENVS} envs x {EPISODES} episodes, margin {args.delta} HNS; "
          f"envpool {benchenv.backend_version('envpool')}, ale-py "
          f"{benchenv.backend_version('ale')}; {time.monotonic() - t0:.0f}s\n")
    print("| game | EnvPool score | ALE score | ALE - EnvPool (HNS), 90% CI | verdict "
          "| seeds/side for 80% PASS | same seed: identical episodes |")
    print("|---|---|---|---|---|---|---|")
    for game, r in rows.items():
        scores = (f"{r['raw_envpool']:.1f} | {r['raw_ale']:.1f}" if "raw_ale" in r
                  else f"{r['mean_envpool']:.4f} | {r['mean_ale']:.4f}")
        lo, hi = -r["ci90"][1], -r["ci90"][0]
        print(f"| {game} | {scores} | {signed(-r['diff'], 4)} [{signed(lo, 4)}, {signed(hi, 4)}] | "
              f"{r['verdict']} | {r['seeds_needed_80'] or '-'} | "
              f"{r.get('paired_identical', '-')} |")
    if args.json:
        args.json.write_text(json.dumps({"noop_max": args.noop_max, "seeds": args.seeds,
                                         "delta": args.delta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
