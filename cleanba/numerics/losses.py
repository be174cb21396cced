"""Return estimators and losses of the Cleanba PPO and IMPALA learners.

Pure, jit-able functions on time-major arrays, in the style of RLax.

Conventions (shared with cleanba/ppo.py and cleanba/impala.py):

- Arrays are time-major, shape (T, N) for N envs. The recursions (`gae`, `vtrace`) scan over
  the leading time axis and are elementwise otherwise, so (T,) and (T, N, ...) work as well;
  the bootstrap value then has the shape of one time slice (N,) / () / (N, ...).
- Transition t: observation obs_t, action a_t, then the env returns reward r_t and done d_t
  (terminated or truncated) after a_t. `discounts_t = gamma * (1 - d_t)`.
- `mask_t` (float, 1 valid / 0 invalid) leaves steps out of a loss. With EnvPool's
  next-step autoreset the step right after a done is a fake "reset step" (action ignored,
  reward 0), so callers pass `mask_t = 1 - d_{t-1}`. Masked steps change neither the loss
  value nor its gradients. They cannot leak into valid steps' targets either: the valid step
  before them has d_{t-1} = 1, so its discount is 0 and its bootstrap is cut.
- Means over valid steps are `sum(x * mask) / max(sum(mask), 1)`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array

ADV_NORM_EPS = 1e-8  # CleanRL: (adv - mean) / (std + 1e-8)


# --------------------------------------------------------------------------------------
# helpers


def _check_same_shape(**arrays: Array) -> None:
    shapes = {name: jnp.shape(x) for name, x in arrays.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"arrays must have the same shape, got {shapes}")


def _check_bootstrap(values: Array, bootstrap_value: Array) -> None:
    if jnp.ndim(values) < 1:
        raise ValueError(
            f"values must be time-major with at least one axis, got {jnp.shape(values)}"
        )
    if jnp.shape(bootstrap_value) != jnp.shape(values)[1:]:
        raise ValueError(
            f"bootstrap_value must have the shape of one time slice of values "
            f"{jnp.shape(values)[1:]}, got {jnp.shape(bootstrap_value)}"
        )


def masked_mean(x: Array, mask: Array) -> Array:
    """sum(x * mask) / max(sum(mask), 1) over all axes; x and mask have the same shape.

    Uses `where` rather than a product so that a NaN or inf in a masked entry cannot reach
    the result or its gradient.
    """
    _check_same_shape(x=x, mask=mask)
    valid = mask > 0
    total = jnp.sum(jnp.where(valid, x, 0.0) * jnp.where(valid, mask, 0.0))
    return total / jnp.maximum(jnp.sum(mask), 1.0)


def masked_sum(x: Array, mask: Array) -> Array:
    """sum(x * mask) over all axes, NaN-safe in masked entries like `masked_mean`."""
    _check_same_shape(x=x, mask=mask)
    valid = mask > 0
    return jnp.sum(jnp.where(valid, x, 0.0) * jnp.where(valid, mask, 0.0))


def categorical_logprob(logits: Array, actions: Array) -> Array:
    """log pi(a) of a softmax policy. logits (..., A), actions int (...) -> (...)."""
    if jnp.shape(logits)[:-1] != jnp.shape(actions):
        raise ValueError(
            f"logits (..., A) and actions (...) disagree: {jnp.shape(logits)} vs {jnp.shape(actions)}"
        )
    log_pi = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(log_pi, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]


def categorical_entropy(logits: Array) -> Array:
    """Entropy -sum_a pi(a) log pi(a) of a softmax policy. logits (..., A) -> (...)."""
    log_pi = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.sum(jnp.exp(log_pi) * log_pi, axis=-1)


# --------------------------------------------------------------------------------------
# return estimators


def gae(
    rewards: Array,
    discounts: Array,
    values: Array,
    bootstrap_value: Array,
    lambda_: float,
) -> tuple[Array, Array]:
    """Generalised advantage estimation (Schulman et al. 2016), time-major.

    Args:
      rewards: r_t, (T, N).
      discounts: gamma * (1 - d_t), (T, N).
      values: V(obs_t), (T, N).
      bootstrap_value: V(obs_T), (N,).
      lambda_: GAE lambda.

    Returns:
      (advantages, returns), both (T, N):
        delta_t = r_t + discount_t V_{t+1} - V_t,
        A_t = delta_t + discount_t lambda A_{t+1} (A_T = 0),
        returns_t = A_t + V_t.
      Both are plain functions of the inputs (no stop_gradient: callers compute them
      outside the loss).
    """
    _check_same_shape(rewards=rewards, discounts=discounts, values=values)
    _check_bootstrap(values, bootstrap_value)
    values_tp1 = jnp.concatenate([values[1:], bootstrap_value[None]], axis=0)
    deltas = rewards + discounts * values_tp1 - values

    def step(adv_tp1: Array, xs: tuple[Array, Array]) -> tuple[Array, Array]:
        delta_t, discount_t = xs
        adv_t = delta_t + discount_t * lambda_ * adv_tp1
        return adv_t, adv_t

    _, advantages = jax.lax.scan(
        step, jnp.zeros_like(bootstrap_value), (deltas, discounts), reverse=True
    )
    return advantages, advantages + values


class VTraceOutput(NamedTuple):
    vs: Array  # V-trace value targets v_s, (T, N), gradient stopped
    pg_advantages: Array  # policy-gradient advantages, (T, N), gradient stopped


def vtrace(
    values: Array,
    bootstrap_value: Array,
    rewards: Array,
    discounts: Array,
    log_rhos: Array,
    lambda_: float = 1.0,
    clip_rho_threshold: float = 1.0,
    clip_pg_rho_threshold: float = 1.0,
    clip_c_threshold: float = 1.0,
) -> VTraceOutput:
    """V-trace targets and advantages (Espeholt et al. 2018), time-major.

    Follows rlax.vtrace_td_error_and_advantage, which the reference Cleanba IMPALA uses.

    Args:
      values: V(obs_t) under the learner's parameters, (T, N).
      bootstrap_value: V(obs_T), (N,).
      rewards: r_t, (T, N).
      discounts: gamma * (1 - d_t), (T, N).
      log_rhos: log pi(a_t|obs_t) - log mu(a_t|obs_t), target vs behaviour, (T, N).
      lambda_: trace-cutting lambda (IMPALA paper, Remark 2), multiplies c_t.
      clip_rho_threshold: rho-bar, clips rho_t in the TD errors.
      clip_pg_rho_threshold: clips rho_t in the policy-gradient advantage.
      clip_c_threshold: c-bar, clips the trace coefficients c_t.

    Returns:
      VTraceOutput(vs, pg_advantages), both (T, N) and both with stopped gradients:
        rho_t = min(rho-bar, exp(log_rho_t)),  c_t = lambda min(c-bar, exp(log_rho_t)),
        vs_t - V_t = rho_t delta_t + discount_t c_t (vs_{t+1} - V_{t+1}),
          with delta_t = r_t + discount_t V_{t+1} - V_t and vs_T = V_T = bootstrap_value,
        pg_adv_t = min(pg-rho-bar, exp(log_rho_t)) (r_t + discount_t q_{t+1} - V_t),
          q_{t+1} = lambda vs_{t+1} + (1 - lambda) V_{t+1} (rlax), which is vs_{t+1} at
          lambda = 1; q_T = bootstrap_value.
    """
    _check_same_shape(values=values, rewards=rewards, discounts=discounts, log_rhos=log_rhos)
    _check_bootstrap(values, bootstrap_value)
    rhos = jnp.exp(log_rhos)
    clipped_rhos = jnp.minimum(clip_rho_threshold, rhos)
    cs = lambda_ * jnp.minimum(clip_c_threshold, rhos)
    values_tp1 = jnp.concatenate([values[1:], bootstrap_value[None]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * values_tp1 - values)

    def step(acc_tp1: Array, xs: tuple[Array, Array, Array]) -> tuple[Array, Array]:
        delta_t, discount_t, c_t = xs
        acc_t = delta_t + discount_t * c_t * acc_tp1  # acc_t = vs_t - V_t
        return acc_t, acc_t

    _, vs_minus_v = jax.lax.scan(
        step, jnp.zeros_like(bootstrap_value), (deltas, discounts, cs), reverse=True
    )
    vs = jax.lax.stop_gradient(vs_minus_v + values)

    q_tp1 = jnp.concatenate(
        [lambda_ * vs[1:] + (1.0 - lambda_) * values[1:], bootstrap_value[None]], axis=0
    )
    pg_advantages = jnp.minimum(clip_pg_rho_threshold, rhos) * (
        rewards + discounts * q_tp1 - values
    )
    return VTraceOutput(vs=vs, pg_advantages=jax.lax.stop_gradient(pg_advantages))


# --------------------------------------------------------------------------------------
# losses


def normalized_advantages(advantages: Array, mask: Array) -> Array:
    """(A - mean) / (std + 1e-8), mean and population std over the valid entries (any shape).

    Masked entries are normalised with the same statistics; they are left out of every loss.
    """
    adv_mean = masked_mean(advantages, mask)
    adv_std = jnp.sqrt(masked_mean(jnp.square(advantages - adv_mean), mask))
    return (advantages - adv_mean) / (adv_std + ADV_NORM_EPS)


def ppo_loss(
    new_logits: Array,
    old_logprobs: Array,
    actions: Array,
    advantages: Array,
    new_values: Array,
    returns: Array,
    mask: Array,
    clip_coef: float,
    ent_coef: float,
    vf_coef: float,
    normalize_advantages: bool = True,
) -> tuple[Array, dict[str, Array]]:
    """Clipped-surrogate PPO loss as in CleanRL's ppo_atari_envpool_xla_jax_scan.py.

    Any batch shape S works (flat (B,) minibatches or (T, N)): every term is elementwise
    and then a masked mean over the valid entries.

    Args:
      new_logits: current policy logits, S + (A,).
      old_logprobs: log mu(a) recorded by the actor, S.
      actions: int actions, S.
      advantages: GAE advantages (inputs, not differentiated), S.
      new_values: current value predictions, S.
      returns: value targets (advantages + actor values), S.
      mask: 1 valid / 0 invalid (reset steps), S.
      clip_coef: surrogate clip epsilon.
      ent_coef: entropy bonus coefficient.
      vf_coef: value loss coefficient.
      normalize_advantages: normalise advantages by their mean and (population) std over the
        valid entries of this minibatch, std + 1e-8 (CleanRL's norm_adv).

    Returns:
      (loss, metrics). loss = pg_loss - ent_coef * entropy + vf_coef * v_loss with
      pg_loss = mean(max(-A ratio, -A clip(ratio, 1 -+ clip_coef))),
      v_loss = 0.5 * mean((new_values - returns)^2) (no value clipping),
      entropy = mean(H(pi)). metrics: loss_total, loss_policy, loss_value, loss_entropy
      (the mean entropy, positive, as CleanRL logs losses/entropy), stat_approx_kl
      (mean((ratio - 1) - log ratio)), stat_clipfrac (mean(|ratio - 1| > clip_coef)).
      The stats carry no gradient. Computed as `ppo_loss_sums` / the valid count.
    """
    if normalize_advantages:
        _check_same_shape(advantages=advantages, mask=mask)
        advantages = normalized_advantages(advantages, mask)
    _, sums = ppo_loss_sums(new_logits, old_logprobs, actions, advantages, new_values, returns,
                            mask, clip_coef=clip_coef, ent_coef=ent_coef, vf_coef=vf_coef)
    count = jnp.maximum(jnp.sum(mask.astype(jnp.float32)), 1.0)
    metrics = {k: v / count for k, v in sums.items() if k != "count"}
    metrics["loss_total"] = (metrics["loss_policy"] - ent_coef * metrics["loss_entropy"]
                             + metrics["loss_value"] * vf_coef)
    return metrics["loss_total"], metrics


def ppo_loss_sums(
    new_logits: Array,
    old_logprobs: Array,
    actions: Array,
    advantages: Array,
    new_values: Array,
    returns: Array,
    mask: Array,
    clip_coef: float,
    ent_coef: float,
    vf_coef: float,
) -> tuple[Array, dict[str, Array]]:
    """`ppo_loss`'s terms as masked SUMS (no advantage normalisation: pass normalised ones).

    ppo_loss = these sums / the valid count. The deterministic learner takes gradients of
    micro-batch sums and adds them in a fixed order, with advantages normalised by the whole
    minibatch's statistics (docs/deterministic.md).

    Returns (loss_sum, sums): loss_sum = pg - ent_coef * entropy + vf_coef * value (sums);
    sums: loss_policy, loss_value, loss_entropy, stat_approx_kl, stat_clipfrac (masked sums;
    the stats carry no gradient) and count (the valid count, sum of mask over mask > 0).
    """
    _check_same_shape(
        old_logprobs=old_logprobs,
        actions=actions,
        advantages=advantages,
        new_values=new_values,
        returns=returns,
        mask=mask,
    )
    if jnp.shape(new_logits)[:-1] != jnp.shape(mask):
        raise ValueError(
            f"new_logits must have shape mask.shape + (num_actions,) = {jnp.shape(mask)} + (A,), "
            f"got {jnp.shape(new_logits)}"
        )
    mask = mask.astype(jnp.float32)
    valid = mask > 0
    advantages = jax.lax.stop_gradient(advantages)
    returns = jax.lax.stop_gradient(returns)
    new_logprobs = categorical_logprob(new_logits, actions)
    # Zero the log-ratio of masked entries before exp so garbage there cannot overflow.
    logratio = jnp.where(valid, new_logprobs - old_logprobs, 0.0)
    ratio = jnp.exp(logratio)
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * jnp.clip(ratio, 1.0 - clip_coef, 1.0 + clip_coef)
    pg = masked_sum(jnp.maximum(pg_loss1, pg_loss2), mask)
    value = 0.5 * masked_sum(jnp.square(new_values - returns), mask)
    entropy = masked_sum(categorical_entropy(new_logits), mask)
    sums = {
        "loss_policy": pg,
        "loss_value": value,
        "loss_entropy": entropy,
        "stat_approx_kl": jax.lax.stop_gradient(masked_sum((ratio - 1.0) - logratio, mask)),
        "stat_clipfrac": jax.lax.stop_gradient(
            masked_sum((jnp.abs(ratio - 1.0) > clip_coef).astype(jnp.float32), mask)
        ),
        "count": jnp.sum(jnp.where(valid, mask, 0.0)),
    }
    return pg - ent_coef * entropy + vf_coef * value, sums


def impala_loss(
    new_logits: Array,
    behaviour_logits: Array,
    actions: Array,
    values: Array,
    bootstrap_value: Array,
    rewards: Array,
    discounts: Array,
    mask: Array,
    lambda_: float = 1.0,
    clip_rho: float = 1.0,
    clip_pg_rho: float = 1.0,
    clip_c: float = 1.0,
    baseline_cost: float = 0.5,
    entropy_cost: float = 0.01,
) -> tuple[Array, dict[str, Array]]:
    """IMPALA loss with V-trace, at the reference Cleanba's scale (cleanba/cleanba_impala.py).

    Row t is the transition (obs_t, a_t, r_t, d_t) with r_t and d_t the reward and done of
    a_t's own step; the reference pairs a_t with the reward and done that came with obs_t
    (one step earlier) and masks episodes' first steps instead of the reset step
    (docs/cleanba.md, "Differences from the reference Cleanba").

    Time-major (T, N); the discount already carries gamma, so there is no gamma argument.
    Like the reference, every term is a masked SUM over time and batch, not a mean:
    its `policy_gradient_loss` and `entropy_loss_fn` multiply rlax's per-env time-mean by T
    and sum over envs, and `baseline_loss = 0.5 * jnp.sum(jnp.square(vtrace_returns.errors)
    * mask)` (vwxyzjn/cleanba commit d1f8979, cleanba/cleanba_impala.py lines 557-597:
    `policy_gradient_loss`, `entropy_loss_fn`, `impala_loss`). The reference's learning
    rate (6e-4 with RMSprop) is tuned for this scale.

    Args:
      new_logits: learner policy logits, (T, N, A).
      behaviour_logits: actor policy logits recorded during the rollout, (T, N, A).
      actions: int actions, (T, N).
      values: learner V(obs_t), (T, N).
      bootstrap_value: learner V(obs_T), (N,).
      rewards: r_t, (T, N).
      discounts: gamma * (1 - d_t), (T, N).
      mask: 1 valid / 0 invalid (reset steps), (T, N).
      lambda_, clip_rho, clip_pg_rho, clip_c: V-trace settings (see `vtrace`).
      baseline_cost: weight of the value loss (the reference's vf_coef, 0.5).
      entropy_cost: weight of the negative-entropy loss (the reference's ent_coef, 0.01).

    Returns:
      (loss, metrics), loss = pg + baseline_cost * value + entropy_cost * entropy_term with
        pg = sum(-log pi(a_t) * pg_adv_t * mask_t),
        value = 0.5 * sum((vs_t - V_t)^2 * mask_t),
        entropy_term = -sum(H(pi_t) * mask_t) (negative entropy, as the reference logs it).
      metrics: loss_total, loss_policy, loss_value, loss_entropy (= entropy_term),
      stat_mean_rho (masked mean of the unclipped importance ratio, no gradient).
      vs and pg_adv are targets (stop_gradient), so values get gradient only from the value
      loss and the policy only from the policy-gradient and entropy terms.
    """
    _check_same_shape(
        actions=actions, values=values, rewards=rewards, discounts=discounts, mask=mask
    )
    if jnp.ndim(values) != 2:
        raise ValueError(f"impala_loss expects time-major (T, N) arrays, got {jnp.shape(values)}")
    expected = jnp.shape(values) + (jnp.shape(new_logits)[-1],)
    if jnp.shape(new_logits) != expected or jnp.shape(behaviour_logits) != expected:
        raise ValueError(
            f"new_logits and behaviour_logits must be (T, N, A) = {expected}, got "
            f"{jnp.shape(new_logits)} and {jnp.shape(behaviour_logits)}"
        )
    mask = mask.astype(jnp.float32)

    new_logprobs = categorical_logprob(new_logits, actions)
    behaviour_logprobs = categorical_logprob(behaviour_logits, actions)
    # The ratio only weights targets: no gradient flows through it.
    log_rhos = jax.lax.stop_gradient(new_logprobs) - behaviour_logprobs
    vtrace_out = vtrace(
        values,
        bootstrap_value,
        rewards,
        discounts,
        log_rhos,
        lambda_=lambda_,
        clip_rho_threshold=clip_rho,
        clip_pg_rho_threshold=clip_pg_rho,
        clip_c_threshold=clip_c,
    )
    pg_loss = masked_sum(-new_logprobs * vtrace_out.pg_advantages, mask)
    v_loss = 0.5 * masked_sum(jnp.square(vtrace_out.vs - values), mask)
    entropy_term = -masked_sum(categorical_entropy(new_logits), mask)
    loss = pg_loss + baseline_cost * v_loss + entropy_cost * entropy_term
    metrics = {
        "loss_total": loss,
        "loss_policy": pg_loss,
        "loss_value": v_loss,
        "loss_entropy": entropy_term,
        "stat_mean_rho": jax.lax.stop_gradient(masked_mean(jnp.exp(log_rhos), mask)),
    }
    return loss, metrics
