"""Cleanba IMPALA: `python -m cleanba.impala atari|cartpole [flags]` (--help lists every flag).

V-trace actor-critic (Espeholt et al. 2018) with the reference Cleanba's settings: rho-bar =
pg-rho-bar = c-bar = 1, lambda 1, losses summed over time and envs (pg + 0.5 value +
0.01 negative entropy), RMSprop PyTorch-style (decay 0.99, eps 0.01 outside the square
root), lr 6e-4 annealed, gradient-norm clip 40, 20-step rollouts. Unlike the reference,
each action is paired with the reward and done of its own step and the reset step is
masked (docs/cleanba.md, "Differences from the reference Cleanba").

The algorithm as a pure function on the learner devices:
- `train_minibatch(state, batch, columns) -> (state, metrics)`: one gradient step on the
  envs `columns` of this device's slice (whole trajectories, T + 1 observations each).
`make_update` calls it once per minibatch (envs split into `num_minibatches` contiguous
blocks, one epoch, like the reference).

Layout invariance: the reference sums the loss per device and then averages gradients over
devices, so its gradient shrinks with the number of learner devices. Here each device's
loss is multiplied by the number of learner devices before the average, so the step is the
gradient of the global sum on any layout; loss_* columns are global sums too.

With --deterministic (docs/deterministic.md) the update uses `deterministic_step`:
each minibatch takes the same share of envs from every env group, and the groups' gradient
sums are added in a fixed order (`deterministic.FixedOrderGradient`), the same bits on every
layout.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState

from cleanba.core.algorithm import Algorithm, UpdateFn
from cleanba.core.cli import main
from cleanba.core.config import CommonConfig, ConfigError
from cleanba.core.layout import Plan
from cleanba.numerics.deterministic import FixedOrderGradient, gradient_path_is_one_program
from cleanba.numerics.losses import impala_loss
from cleanba.numerics.networks import init_params
from cleanba.numerics.parallel import LearnerMesh, learner_value_and_grad, mean_of_steps
from runrecord.words import counted

SYSTEM = "cleanba-impala"
DESCRIPTION = (
    "Cleanba IMPALA (V-trace). Pick a preset (atari: the paper's settings; cartpole: a small CPU "
    "run), then override any flag: python -m cleanba.impala atari --env-id Pong-v5 --seed 2"
)
METRIC_COLUMNS = (
    "loss_total", "loss_policy", "loss_value", "loss_entropy", "stat_mean_rho",
    "stat_learning_rate",
)


@dataclass
class ImpalaConfig(CommonConfig):
    """Cleanba IMPALA (defaults: the paper's Atari settings)."""

    num_steps: int = 20
    """Rollout (unroll) length: steps per env per batch. Global batch = num_envs x num_steps."""
    learning_rate: float = 6e-4
    """RMSprop learning rate (start value when annealed)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the updates."""
    gamma: float = 0.99
    """Discount factor."""
    num_minibatches: int = 4
    """Gradient steps per batch: envs split into this many blocks (global)."""
    ent_coef: float = 0.01
    """Weight of the negative-entropy loss."""
    vf_coef: float = 0.5
    """Weight of the value (baseline) loss."""
    max_grad_norm: float = 40.0
    """Global gradient-norm clip."""
    rmsprop_decay: float = 0.99
    """RMSprop decay (PyTorch's alpha)."""
    rmsprop_eps: float = 0.01
    """RMSprop epsilon, added outside the square root as in PyTorch."""
    vtrace_lambda: float = 1.0
    """V-trace lambda (trace cutting)."""
    clip_rho: float = 1.0
    """V-trace rho-bar (clips importance weights in the value targets)."""
    clip_pg_rho: float = 1.0
    """V-trace clip of importance weights in the policy-gradient advantage."""
    clip_c: float = 1.0
    """V-trace c-bar (clips the trace coefficients)."""


PRESETS: dict[str, tuple[str, ImpalaConfig]] = {
    "atari": (
        "the paper's Atari settings (Breakout-v5, 128 envs x 20 steps, 50M steps = 200M frames)",
        ImpalaConfig(total_timesteps=50_000_000),
    ),
    "cartpole": (
        "a small CPU preset: CartPole-v1 with an MLP",
        # 32 envs (4 minibatches of 8 envs x 32 steps), 400k steps, gradient-norm clip 8.
        # On an AMD EPYC, final 50-episode means of seeds 1-10: 446, 492, 487,
        # 497, 500, 496, 494, 496, 495, 411. With the Atari clip of 40 (effectively none
        # for this MLP) ~1 seed in 5 collapsed after learning (seeds 1-5: 500, 271, 500,
        # 496, 500); clip 2 learned slower (seed 2: 284), clip 0.5 did not reach 400.
        # Float bits, and so single-seed outcomes, differ between CPU models.
        ImpalaConfig(
            env_id="CartPole-v1",
            total_timesteps=400_000,
            num_envs=32,
            num_steps=32,
            num_actor_threads=1,
            num_minibatches=4,
            learning_rate=2e-3,
            max_grad_norm=8.0,
            separate_critic=True,
        ),
    ),
}


def pytorch_rmsprop(learning_rate: Any, decay: float, eps: float) -> optax.GradientTransformation:
    """RMSprop as PyTorch does it: g / (sqrt(E[g^2]) + eps), E[g^2] starting at 0."""
    return optax.chain(
        optax.scale_by_rms(decay=decay, eps=eps, initial_scale=0.0, eps_in_sqrt=False),
        optax.scale_by_learning_rate(learning_rate),
    )


def make_optimizer(config: ImpalaConfig, num_updates: int) -> optax.GradientTransformation:
    def schedule(count: jax.Array) -> jax.Array:
        frac = 1.0 - (count // config.num_minibatches) / num_updates
        return config.learning_rate * frac

    lr = schedule if config.anneal_lr else config.learning_rate
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.inject_hyperparams(pytorch_rmsprop)(
            learning_rate=lr, decay=config.rmsprop_decay, eps=config.rmsprop_eps
        ),
    )


TRAJECTORY_FIELDS = ("obs", "logits", "actions", "rewards", "dones", "mask")


def select_columns(batch: dict[str, jax.Array], columns: jax.Array) -> dict[str, jax.Array]:
    """The envs `columns` of this device's slice, all steps: leaves (T or T + 1, m, ...)."""
    return {name: batch[name][:, columns] for name in TRAJECTORY_FIELDS}


def trajectory_loss(network: Any, config: ImpalaConfig, params: Any,
                    trajectories: dict[str, jax.Array]):
    """V-trace loss (a sum over samples, as the reference) of whole trajectories (T + 1
    observations, T actions each; see `select_columns`)."""
    obs = trajectories["obs"]  # (T + 1, m, ...)
    steps, m = obs.shape[0] - 1, obs.shape[1]
    logits, values = network.apply(params, obs.reshape((-1, *obs.shape[2:])))
    logits = logits.reshape(steps + 1, m, -1)
    values = values.reshape(steps + 1, m)
    return impala_loss(
        logits[:-1], trajectories["logits"], trajectories["actions"], values[:-1], values[-1],
        trajectories["rewards"], config.gamma * (1.0 - trajectories["dones"]),
        trajectories["mask"], lambda_=config.vtrace_lambda, clip_rho=config.clip_rho,
        clip_pg_rho=config.clip_pg_rho, clip_c=config.clip_c,
        baseline_cost=config.vf_coef, entropy_cost=config.ent_coef,
    )


def minibatch_loss(network: Any, config: ImpalaConfig, params: Any,
                   batch: dict[str, jax.Array], columns: jax.Array):
    """V-trace loss of the envs `columns` of this device's slice, all T steps."""
    return trajectory_loss(network, config, params, select_columns(batch, columns))


def train_minibatch(network: Any, config: ImpalaConfig, num_learner_devices: int,
                    state: TrainState, batch: dict[str, jax.Array], columns: jax.Array):
    """One V-trace gradient step on the envs `columns` of this device's slice."""

    def loss_fn(params):
        loss, metrics = minibatch_loss(network, config, params, batch, columns)
        # Sum over all devices' samples after the average below (see the module docstring).
        return loss * num_learner_devices, metrics

    grads, metrics = learner_value_and_grad(loss_fn, state.params)
    metrics = {k: v * num_learner_devices if k.startswith("loss_") else v
               for k, v in metrics.items()}
    state = state.apply_gradients(grads=grads)
    metrics["stat_learning_rate"] = state.opt_state[1].hyperparams["learning_rate"]
    return state, metrics


def deterministic_select(batch: dict[str, jax.Array], columns: jax.Array, k: jax.Array):
    """Env group k's share of the minibatch (columns: (groups, envs)), its own program."""
    return select_columns(batch, columns[k])


def deterministic_microbatch_loss(network: Any, config: ImpalaConfig, params: Any,
                                  trajectories: dict[str, jax.Array]):
    """V-trace loss SUMS of one env group's share of the minibatch.

    stat_mean_rho comes back multiplied by the valid count, so that the fixed-order sum over
    groups divided by the summed count is the minibatch's masked mean."""
    loss, metrics = trajectory_loss(network, config, params, trajectories)
    count = jnp.sum(trajectories["mask"])
    metrics["stat_mean_rho"] = metrics["stat_mean_rho"] * jnp.maximum(count, 1.0)
    return loss, {**metrics, "count": count}


def deterministic_finish(state: TrainState, grads: Any, sums: dict):
    """Gradient step on the summed loss (as the default learner); the minibatch's metrics."""
    state = state.apply_gradients(grads=grads)
    metrics = {k: v for k, v in sums.items() if k.startswith("loss_") and k != "loss_sum"}
    metrics["stat_mean_rho"] = sums["stat_mean_rho"] / jnp.maximum(sums["count"], 1.0)
    metrics["stat_learning_rate"] = state.opt_state[1].hyperparams["learning_rate"]
    return state, metrics


def make_algorithm(config: ImpalaConfig, plan: Plan, obs_shape: tuple[int, ...],
                   num_actions: int) -> Algorithm:
    if config.num_minibatches < 1:
        raise ConfigError("--num-minibatches must be >= 1")
    envs_per_device = plan.envs_per_learner_device
    if envs_per_device % config.num_minibatches:
        raise ConfigError(
            f"each learner device gets {envs_per_device} envs (num_envs {plan.num_envs} / "
            f"{counted(plan.total_learner_devices, 'learner device')}), which --num-minibatches "
            f"{config.num_minibatches} does not divide; choose a divisor of {envs_per_device} "
            "or change --num-envs"
        )
    if plan.deterministic and plan.envs_per_group % config.num_minibatches:
        raise ConfigError(
            f"--deterministic: each env group holds {plan.envs_per_group} envs, which "
            f"--num-minibatches {config.num_minibatches} does not divide (every minibatch "
            "takes the same share of every group)"
        )
    network = config.make_network(obs_shape, num_actions)
    tx = make_optimizer(config, plan.num_updates)
    envs_per_minibatch = envs_per_device // config.num_minibatches

    def init_state(key: jax.Array) -> TrainState:
        params = init_params(network, obs_shape, key)
        return TrainState.create(apply_fn=network.apply, params=params, tx=tx)

    def deterministic_step(mesh: LearnerMesh) -> tuple[Any, list]:
        # Minibatch j takes envs j * share ... (j + 1) * share - 1 of every env group (share =
        # envs per group / minibatches); device-local columns, the same on every device.
        epg, gpd = plan.envs_per_group, plan.groups_per_learner_device
        share = epg // config.num_minibatches
        step = FixedOrderGradient(mesh, deterministic_select,
                                  partial(deterministic_microbatch_loss, network, config),
                                  (True, False), deterministic_finish, gpd,
                                  gradient_path_is_one_program(obs_shape))
        columns = [
            mesh.replicate(np.array([[k * epg + j * share + c for c in range(share)]
                                     for k in range(gpd)], dtype=np.int32))
            for j in range(config.num_minibatches)
        ]
        return step, columns

    def default_step(mesh: LearnerMesh) -> tuple[Any, list]:
        step = mesh.map(
            partial(train_minibatch, network, config, plan.total_learner_devices),
            (False, True, False), (False, False),
        )
        blocks = [
            mesh.replicate(np.arange(m * envs_per_minibatch, (m + 1) * envs_per_minibatch,
                                     dtype=np.int32))
            for m in range(config.num_minibatches)
        ]
        return step, blocks

    def make_update(mesh: LearnerMesh) -> UpdateFn:
        # One pass over the minibatches; the mode decides the step and each minibatch's envs.
        step, minibatch_columns = (deterministic_step if plan.deterministic
                                   else default_step)(mesh)

        def update(state: TrainState, batch: dict, update_index: int):
            metrics = []
            for columns in minibatch_columns:
                state, mb_metrics = step(state, batch, columns)
                metrics.append(mb_metrics)
            return state, mean_of_steps(metrics)

        return update

    return Algorithm(
        system=SYSTEM,
        network=network,
        init_state=init_state,
        batch_fields=("obs", "actions", "logits", "rewards", "dones", "mask"),
        metric_columns=METRIC_COLUMNS,
        make_update=make_update,
        derived={"envs_per_minibatch_per_learner_device": envs_per_minibatch},
    )


def cli(argv: list[str] | None = None) -> int:
    return main(PRESETS, make_algorithm, SYSTEM, DESCRIPTION, argv)


if __name__ == "__main__":
    sys.exit(cli())
