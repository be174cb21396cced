"""Run the user's checkout of the reference Cleanba PPO (vwxyzjn/cleanba) as shipped, except
for the textual patch today's JAX and EnvPool need, applied to a copy in a temporary folder.

`PATCHES` is the whole patch; `apply_patches` refuses a checkout where any of them does not
match (a different version of the script), so what ran is always what the table lists.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path("cleanba") / "cleanba_ppo.py"
SHIMS = Path(__file__).resolve().parent / "reference_shims.py"


@dataclass(frozen=True)
class Patch:
    why: str
    old: str
    new: str


PATCHES = (
    Patch("tensorboardX is not installed: a writer that logs scalars with wall times",
          "from tensorboardX import SummaryWriter",
          "from reference_shims import SummaryWriter\nimport reference_shims"),
    Patch("jax.tree_map was removed (JAX 0.6)", "jax.tree_map(", "jax.tree.map("),
    Patch("jax.device_put_sharded was removed (JAX 0.8)", "jax.device_put_sharded(",
          "reference_shims.device_put_sharded("),
    Patch("jax.device_put_replicated was removed (JAX 0.8)", "jax.device_put_replicated(",
          "reference_shims.device_put_replicated("),
    Patch("EnvPool's gym API needs the gym package, not installed: the gymnasium env with "
          "the old API", 'env_type="gym",', 'env_type="gymnasium",'),
    Patch("flax 0.12's TrainState.create asks `'overwrite_with_gradient' in params`; the "
          "reference's AgentParams (a struct dataclass) answers no",
          "\n\nclass Transition(NamedTuple):",
          "\n\nAgentParams.__contains__ = reference_shims.contains_nothing\n\n\n"
          "class Transition(NamedTuple):"),
    Patch("(same)", "        envs.num_envs = num_envs\n",
          "        envs = reference_shims.OldGymApi(envs)\n        envs.num_envs = num_envs\n"),
)


class ReferenceError(ValueError):
    """The checkout is not a reference Cleanba this patch fits."""


def patch_lines() -> list[str]:
    """The patch as the results list it."""
    def one_line(text: str) -> str:
        return " / ".join(line.strip() for line in text.strip().splitlines() if line.strip())

    return [f"{p.why}: `{one_line(p.old)}` -> `{one_line(p.new)}`" for p in PATCHES]


def patched_script(checkout: Path, workdir: Path) -> Path:
    """Copy the checkout's PPO script into `workdir` with PATCHES applied and the shims
    beside it; returns the script's path."""
    source = checkout / SCRIPT
    if not source.is_file():
        raise ReferenceError(f"{checkout}: no {SCRIPT} (expected a checkout of vwxyzjn/cleanba)")
    text = source.read_text()
    for p in PATCHES:
        if p.old not in text:
            raise ReferenceError(f"{source}: the patch '{p.why}' does not match "
                                 f"(no {p.old.strip()!r}); a different version of the script?")
        text = text.replace(p.old, p.new)
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / "cleanba_ppo.py"
    target.write_text(text)
    shutil.copy(SHIMS, workdir / "reference_shims.py")
    return target


def reference_args(env_id: str, num_envs: int, num_threads: int, num_steps: int,
                   num_minibatches: int, total_timesteps: int, seed: int) -> list[str]:
    """The reference's flags for our settings: one actor device, one learner device (0),
    actor and learner concurrent (its `--concurrency`, our `cleanba` architecture), one
    learner log line per update (times for SPS deltas)."""
    if num_envs % num_threads:
        raise ReferenceError(f"{num_threads} actor threads must divide {num_envs} envs")
    return ["--env-id", env_id, "--seed", str(seed), "--local-num-envs",
            str(num_envs // num_threads), "--num-actor-threads", str(num_threads),
            "--num-steps", str(num_steps), "--num-minibatches", str(num_minibatches),
            "--total-timesteps", str(total_timesteps), "--concurrency", "--log-frequency", "1",
            "--actor-device-ids", "0", "--learner-device-ids", "0"]
