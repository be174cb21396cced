"""What the ale-exact backend costs (benchenv/ale_exact.py): env steps per second of
ale-exact against ale (ale-py's vector env) on the same game, envs and random actions, and
the size and time of one env state save (get_state) and load (set_state).

    python benchmarks/bench_ale_exact.py --game Breakout-v5 --envs 8 --steps 500

Each backend steps `envs` envs `steps` times (after a reset and 20 warm-up steps) with
uniform random actions; ale gets one thread per env up to the CPUs (its default), as a
trainer's actor thread would give it; ale-exact steps its games one after the other.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchenv  # noqa: E402


def steps_per_second(backend: str, game: str, envs: int, steps: int) -> tuple[float, object]:
    env = benchenv.make_env(game, envs, 1,
                            protocol=benchenv.env_protocol(game, backend=backend))
    env.reset()
    actions = np.random.default_rng(0).integers(0, 18, (steps + 20, envs)).astype(np.int32)
    for a in actions[:20]:
        env.step(a)
    t0 = time.perf_counter()
    for a in actions[20:]:
        env.step(a)
    return envs * steps / (time.perf_counter() - t0), env


def main(game: str = "Breakout-v5", envs: int = 8, steps: int = 500, repeats: int = 20) -> None:
    ale_sps, ale_env = steps_per_second("ale", game, envs, steps)
    ale_env.close()  # type: ignore[attr-defined]
    exact_sps, env = steps_per_second("ale-exact", game, envs, steps)
    t0 = time.perf_counter()
    for _ in range(repeats):
        state = env.get_state()  # type: ignore[attr-defined]
    save_ms = (time.perf_counter() - t0) / repeats * 1e3
    t0 = time.perf_counter()
    for _ in range(repeats):
        env.set_state(state)  # type: ignore[attr-defined]
    load_ms = (time.perf_counter() - t0) / repeats * 1e3
    print(f"{game}, {envs} envs, {steps} steps of random actions")
    print(f"ale        {ale_sps:9.0f} env steps/s")
    print(f"ale-exact  {exact_sps:9.0f} env steps/s ({exact_sps / ale_sps:.2f}x ale)")
    print(f"env state  {len(state):,} bytes ({len(state) / envs / 1024:.1f} KiB per env); "
          f"save {save_ms:.2f} ms, load {load_ms:.2f} ms")


if __name__ == "__main__":
    tyro.cli(main)
