"""Cleanba PPO: `python -m cleanba.ppo atari|cartpole [flags]` (--help lists every flag).

The algorithm as pure functions on the learner devices:
- `prepare(state, batch) -> (advantages, returns)`: GAE over the rollout with the actor's
  values; the bootstrap value V(obs_T) uses the learner's current parameters.
- `train_minibatch(state, batch, targets, idx) -> (state, metrics)`: one clipped-surrogate
  gradient step on the samples `idx` (flat indices t * envs + e of this device's slice),
  gradients averaged over learner devices.
`make_update` loops over epochs x minibatches in Python, calling the jitted step (on CPU,
XLA runs convolutions inside lax.scan far slower than a jitted step called from a loop).
Minibatch permutations come from NumPy seeded by (seed, update, epoch).

With --deterministic (docs/deterministic.md) the update is `make_deterministic_update`:
minibatches drawn per env group (`deterministic_minibatch_indices`), advantage statistics
and gradients summed in a fixed order (`deterministic.FixedOrderGradient`), the same bits on
every layout.
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
from cleanba.numerics.deterministic import (
    FixedOrderGradient,
    fixed_order_masked_mean_std,
    gradient_path_is_one_program,
    microbatched_apply,
)
from cleanba.numerics.losses import ADV_NORM_EPS, gae, ppo_loss, ppo_loss_sums
from cleanba.numerics.networks import init_params
from cleanba.numerics.parallel import (
    LEARNER_AXIS,
    LearnerMesh,
    learner_value_and_grad,
    mean_of_steps,
)

SYSTEM = "cleanba-ppo"
DESCRIPTION = (
    "Cleanba PPO. Pick a preset (atari: the paper's settings; cartpole: a small CPU run), then "
    "override any flag: python -m cleanba.ppo atari --env-id Pong-v5 --seed 2"
)
METRIC_COLUMNS = (
    "loss_total", "loss_policy", "loss_value", "loss_entropy", "stat_approx_kl", "stat_clipfrac",
    "stat_learning_rate",
)


@dataclass
class PPOConfig(CommonConfig):
    """Cleanba PPO (defaults: the paper's Atari settings)."""

    learning_rate: float = 2.5e-4
    """Adam learning rate (start value when annealed)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the updates."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    num_minibatches: int = 4
    """Minibatches per epoch (global; each learner device takes its share of each)."""
    update_epochs: int = 4
    """Passes over each batch."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    clip_coef: float = 0.1
    """Surrogate clipping epsilon."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient (MSE, no value clipping)."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    adam_eps: float = 1e-5
    """Adam epsilon."""


PRESETS: dict[str, tuple[str, PPOConfig]] = {
    "atari": (
        "the paper's Atari settings (Breakout-v5, 128 envs x 128 steps, 50M steps = 200M frames)",
        PPOConfig(total_timesteps=50_000_000),
    ),
    "cartpole": (
        "a small CPU preset: CartPole-v1 with an MLP, reaches a return near 500 in ~1 minute",
        PPOConfig(
            env_id="CartPole-v1",
            total_timesteps=250_000,
            num_envs=8,
            num_steps=128,
            num_actor_threads=1,
            learning_rate=1e-3,
            clip_coef=0.2,
            ent_coef=0.0,
            separate_critic=True,
        ),
    ),
}


def make_optimizer(config: PPOConfig, num_updates: int) -> optax.GradientTransformation:
    steps_per_update = config.num_minibatches * config.update_epochs

    def schedule(count: jax.Array) -> jax.Array:
        frac = 1.0 - (count // steps_per_update) / num_updates
        return config.learning_rate * frac

    lr = schedule if config.anneal_lr else config.learning_rate
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.inject_hyperparams(optax.adam)(learning_rate=lr, eps=config.adam_eps),
    )


def prepare(network: Any, config: PPOConfig, inference_envs: int, state: TrainState,
            batch: dict[str, jax.Array]):
    """Advantages and returns (T, envs) of one device's slice of the batch. With
    inference_envs > 0 (deterministic mode) the bootstrap value is computed in chunks of
    that many envs (`microbatched_apply`), so no env's value depends on its neighbours."""
    last_obs = batch["obs"][-1]
    if inference_envs:
        _, bootstrap_value = microbatched_apply(network.apply, state.params, last_obs,
                                                inference_envs)
    else:
        _, bootstrap_value = network.apply(state.params, last_obs)
    discounts = config.gamma * (1.0 - batch["dones"])
    advantages, returns = gae(
        batch["rewards"], discounts, batch["values"], bootstrap_value, config.gae_lambda
    )
    return ((advantages, returns),)


def train_minibatch(network: Any, config: PPOConfig, state: TrainState,
                    batch: dict[str, jax.Array], targets: tuple[jax.Array, jax.Array],
                    idx: jax.Array):
    """One gradient step on samples `idx` (flat t * envs + e) of this device's slice."""
    advantages, returns = targets
    num_envs = batch["actions"].shape[1]
    t, e = idx // num_envs, idx % num_envs
    obs = batch["obs"][t, e]

    def loss_fn(params):
        logits, values = network.apply(params, obs)
        return ppo_loss(
            logits, batch["logprobs"][t, e], batch["actions"][t, e], advantages[t, e], values,
            returns[t, e], batch["mask"][t, e], clip_coef=config.clip_coef,
            ent_coef=config.ent_coef, vf_coef=config.vf_coef,
            normalize_advantages=config.norm_adv,
        )

    grads, metrics = learner_value_and_grad(loss_fn, state.params)
    state = state.apply_gradients(grads=grads)
    metrics["stat_learning_rate"] = state.opt_state[1].hyperparams["learning_rate"]
    return state, metrics


def deterministic_minibatch_indices(config: PPOConfig, plan: Plan, update_index: int,
                                    epoch: int) -> list[np.ndarray]:
    """Deterministic mode: this process's sample indices of every minibatch of an epoch.

    The rule does not depend on the layout: each env group g (envs_per_group consecutive
    global envs, T steps) is permuted by default_rng([seed, update, epoch, g]); minibatch j
    takes slice j of every group's permutation (a stratified shuffle). Returns one array
    per minibatch, (this process's learner devices, groups per device, samples per group
    and minibatch), of flat indices t * envs_per_learner_device + local env into the
    device's slice of the batch.
    """
    T, epg = plan.num_steps, plan.envs_per_group
    per_group = T * epg // config.num_minibatches
    gpd = plan.groups_per_learner_device
    local_devices = len(plan.learner_device_ids)
    first_group = plan.process_index * local_devices * gpd
    out = np.empty((config.num_minibatches, local_devices, gpd, per_group), np.int32)
    for d in range(local_devices):
        for k in range(gpd):
            g = first_group + d * gpd + k
            perm = np.random.default_rng([config.seed, update_index, epoch, g]).permutation(T * epg)
            t, e = perm // epg, perm % epg
            flat = t * plan.envs_per_learner_device + k * epg + e
            out[:, d, k] = flat.reshape(config.num_minibatches, per_group)
    return list(out)


def deterministic_advantage_stats(targets: tuple[jax.Array, jax.Array], mask: jax.Array,
                                  idx: jax.Array):
    """(mean, std) of the minibatch's advantages (idx: (groups, samples)), fixed order."""
    num_envs = mask.shape[1]
    t, e = idx // num_envs, idx % num_envs
    mean, std, _ = fixed_order_masked_mean_std(targets[0][t, e], mask[t, e], LEARNER_AXIS)
    return mean, std


def deterministic_select(batch: dict[str, jax.Array], targets: tuple[jax.Array, jax.Array],
                         idx: jax.Array, adv_stats: tuple[jax.Array, jax.Array],
                         k: jax.Array) -> dict[str, jax.Array]:
    """Env group k's share of the minibatch (idx: (groups, samples)), its own program:
    indexing only, so the loss's program is the same on every layout."""
    advantages, returns = targets
    num_envs = batch["actions"].shape[1]
    t, e = idx[k] // num_envs, idx[k] % num_envs
    mean, std = adv_stats
    return {"obs": batch["obs"][t, e], "logprobs": batch["logprobs"][t, e],
            "actions": batch["actions"][t, e], "advantages": advantages[t, e],
            "returns": returns[t, e], "mask": batch["mask"][t, e], "adv_mean": mean,
            "adv_std": std}


def deterministic_microbatch_loss(network: Any, config: PPOConfig, params: Any,
                                  mb: dict[str, jax.Array]):
    """Loss SUMS of one env group's share of the minibatch (see `deterministic_select`)."""
    adv = mb["advantages"]
    if config.norm_adv:
        adv = (adv - mb["adv_mean"]) / (mb["adv_std"] + ADV_NORM_EPS)
    logits, values = network.apply(params, mb["obs"])
    return ppo_loss_sums(logits, mb["logprobs"], mb["actions"], adv, values, mb["returns"],
                         mb["mask"], clip_coef=config.clip_coef, ent_coef=config.ent_coef,
                         vf_coef=config.vf_coef)


def deterministic_finish(config: PPOConfig, state: TrainState, grads: Any, sums: dict):
    """Mean-loss gradient step from the fixed-order sums; ppo_loss's metrics."""
    count = jnp.maximum(sums["count"], 1.0)
    state = state.apply_gradients(grads=jax.tree.map(lambda g: g / count, grads))
    metrics = {k: v / count for k, v in sums.items() if k not in ("count", "loss_sum")}
    metrics["loss_total"] = (metrics["loss_policy"] - config.ent_coef * metrics["loss_entropy"]
                             + metrics["loss_value"] * config.vf_coef)
    metrics["stat_learning_rate"] = state.opt_state[1].hyperparams["learning_rate"]
    return state, metrics


def make_algorithm(config: PPOConfig, plan: Plan, obs_shape: tuple[int, ...],
                   num_actions: int) -> Algorithm:
    samples_per_device = plan.num_steps * plan.envs_per_learner_device
    if samples_per_device % config.num_minibatches:
        raise ConfigError(
            f"each learner device gets num_steps x envs per learner device = {plan.num_steps} x "
            f"{plan.envs_per_learner_device} = {samples_per_device} samples, which "
            f"--num-minibatches {config.num_minibatches} does not divide; choose a divisor of "
            f"{samples_per_device} or change --num-envs/--num-steps"
        )
    if config.num_minibatches < 1 or config.update_epochs < 1:
        raise ConfigError("--num-minibatches and --update-epochs must be >= 1")
    if plan.deterministic and (plan.num_steps * plan.envs_per_group) % config.num_minibatches:
        raise ConfigError(
            f"--deterministic: each env group holds num_steps x envs per group = "
            f"{plan.num_steps} x {plan.envs_per_group} samples, which --num-minibatches "
            f"{config.num_minibatches} does not divide (every minibatch takes the same share "
            "of every group)"
        )
    network = config.make_network(obs_shape, num_actions)
    tx = make_optimizer(config, plan.num_updates)
    minibatch_size = samples_per_device // config.num_minibatches

    def init_state(key: jax.Array) -> TrainState:
        params = init_params(network, obs_shape, key)
        return TrainState.create(apply_fn=network.apply, params=params, tx=tx)

    def make_deterministic_update(mesh: LearnerMesh) -> UpdateFn:
        prepare_fn = mesh.map(partial(prepare, network, config, plan.envs_per_group),
                              (False, True), (True,))
        stats_fn = mesh.map(deterministic_advantage_stats, (True, True, True), (False, False))
        step = FixedOrderGradient(
            mesh, deterministic_select, partial(deterministic_microbatch_loss, network, config),
            (True, True, True, False), partial(deterministic_finish, config),
            plan.groups_per_learner_device, gradient_path_is_one_program(obs_shape))

        def update(state: TrainState, batch: dict, update_index: int):
            (targets,) = prepare_fn(state, batch)
            metrics = []
            for epoch in range(config.update_epochs):
                for idx in deterministic_minibatch_indices(config, plan, update_index, epoch):
                    idx = mesh.shard(idx)
                    adv_stats = stats_fn(targets, batch["mask"], idx)
                    state, mb_metrics = step(state, batch, targets, idx, adv_stats)
                    metrics.append(mb_metrics)
            return state, mean_of_steps(metrics)

        return update

    def make_update(mesh: LearnerMesh) -> UpdateFn:
        if plan.deterministic:
            return make_deterministic_update(mesh)
        prepare_fn = mesh.map(partial(prepare, network, config, 0), (False, True), (True,))
        step_fn = mesh.map(partial(train_minibatch, network, config),
                           (False, True, True, False), (False, False))

        def update(state: TrainState, batch: dict, update_index: int):
            (targets,) = prepare_fn(state, batch)
            metrics = []
            for epoch in range(config.update_epochs):
                rng = np.random.default_rng([config.seed, update_index, epoch])
                perm = rng.permutation(samples_per_device).astype(np.int32)
                for m in range(config.num_minibatches):
                    idx = mesh.replicate(perm[m * minibatch_size:(m + 1) * minibatch_size])
                    state, mb_metrics = step_fn(state, batch, targets, idx)
                    metrics.append(mb_metrics)
            return state, mean_of_steps(metrics)

        return update

    return Algorithm(
        system=SYSTEM,
        network=network,
        init_state=init_state,
        batch_fields=("obs", "actions", "logprobs", "values", "rewards", "dones", "mask"),
        metric_columns=METRIC_COLUMNS,
        make_update=make_update,
        derived={"minibatch_size": plan.batch_size // config.num_minibatches,
                 "minibatch_size_per_learner_device": minibatch_size},
    )


def cli(argv: list[str] | None = None) -> int:
    return main(PRESETS, make_algorithm, SYSTEM, DESCRIPTION, argv)


if __name__ == "__main__":
    sys.exit(cli())
