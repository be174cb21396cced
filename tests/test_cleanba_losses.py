"""Tests of cleanba/numerics/losses.py: hand-computed numbers first, then loops and invariances."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cleanba.numerics import losses

LN2 = math.log(2.0)


# Jitted once here: one compiled program per shape is much faster than op-by-op dispatch.
gae = jax.jit(losses.gae)
vtrace = jax.jit(losses.vtrace)
ppo_loss = jax.jit(losses.ppo_loss, static_argnames=("normalize_advantages",))
impala_loss = jax.jit(losses.impala_loss)


def close(actual, expected, tol=1e-5):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=tol, atol=tol)


# --------------------------------------------------------------------------------------
# GAE


def test_gae_hand_computed_with_done_in_the_middle():
    # gamma = 0.5, lambda = 0.5, done after step 1 -> discounts = [0.5, 0, 0.5].
    # rewards [1, 2, 4], values [1, 1, 3], bootstrap V_3 = 4.
    # delta_2 = 4 + 0.5*4 - 3 = 3               A_2 = 3
    # delta_1 = 2 + 0*3 - 1   = 1               A_1 = 1 + 0*0.5*3 = 1   (done cuts A_2)
    # delta_0 = 1 + 0.5*1 - 1 = 0.5             A_0 = 0.5 + 0.5*0.5*1 = 0.75
    # returns = A + V = [1.75, 2, 6]
    rewards = jnp.array([1.0, 2.0, 4.0])
    discounts = jnp.array([0.5, 0.0, 0.5])
    values = jnp.array([1.0, 1.0, 3.0])
    adv, ret = gae(rewards, discounts, values, jnp.array(4.0), 0.5)
    close(adv, [0.75, 1.0, 3.0])
    close(ret, [1.75, 2.0, 6.0])


def gae_loop(rewards, discounts, values, bootstrap, lam):
    T = rewards.shape[0]
    adv = np.zeros_like(rewards)
    next_adv = np.zeros_like(bootstrap)
    for t in reversed(range(T)):
        next_v = bootstrap if t == T - 1 else values[t + 1]
        delta = rewards[t] + discounts[t] * next_v - values[t]
        next_adv = delta + discounts[t] * lam * next_adv
        adv[t] = next_adv
    return adv, adv + values


def random_rollout(seed, T=7, N=5):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    dones = (rng.random((T, N)) < 0.2).astype(np.float32)
    discounts = (0.9 * (1.0 - dones)).astype(np.float32)
    values = rng.normal(size=(T, N)).astype(np.float32)
    bootstrap = rng.normal(size=(N,)).astype(np.float32)
    log_rhos = rng.normal(scale=0.7, size=(T, N)).astype(np.float32)
    return rewards, dones, discounts, values, bootstrap, log_rhos


@pytest.mark.parametrize("lam", [0.0, 0.95, 1.0])
def test_gae_matches_python_loop_on_random_data(lam):
    rewards, _, discounts, values, bootstrap, _ = random_rollout(0)
    adv, ret = gae(rewards, discounts, values, bootstrap, lam)
    adv_ref, ret_ref = gae_loop(rewards, discounts, values, bootstrap, lam)
    close(adv, adv_ref)
    close(ret, ret_ref)


def test_gae_rejects_bootstrap_of_wrong_shape():
    rewards, _, discounts, values, bootstrap, _ = random_rollout(0)
    with pytest.raises(ValueError, match="bootstrap_value"):
        gae(rewards, discounts, values, bootstrap[:2], 0.9)


# --------------------------------------------------------------------------------------
# V-trace


def test_vtrace_hand_computed_rho_above_then_below_one():
    # discounts 0.9, rewards [1, 1], values [1, 2], bootstrap 3, lambda 1, all clips 1.
    # rhos = [2, 0.5] -> clipped rho = [1, 0.5], c = [1, 0.5]
    # delta_1 = 0.5 * (1 + 0.9*3 - 2) = 0.85        vs_1 = 2 + 0.85 = 2.85
    # delta_0 = 1 * (1 + 0.9*2 - 1)  = 1.8
    # vs_0 - V_0 = 1.8 + 0.9 * c_0(=1) * 0.85 = 2.565   vs_0 = 3.565
    # pg_adv_1 = 0.5 * (1 + 0.9*3 - 2)    = 0.85
    # pg_adv_0 = 1 * (1 + 0.9*2.85 - 1)   = 2.565
    out = vtrace(
        values=jnp.array([1.0, 2.0]),
        bootstrap_value=jnp.array(3.0),
        rewards=jnp.array([1.0, 1.0]),
        discounts=jnp.array([0.9, 0.9]),
        log_rhos=jnp.log(jnp.array([2.0, 0.5])),
    )
    close(out.vs, [3.565, 2.85])
    close(out.pg_advantages, [2.565, 0.85])


def test_vtrace_hand_computed_rho_below_then_above_one():
    # Same data, rhos = [0.5, 2] -> clipped rho = [0.5, 1], c = [0.5, 1]
    # delta_1 = 1 * (1 + 2.7 - 2) = 1.7                 vs_1 = 3.7
    # delta_0 = 0.5 * (1 + 1.8 - 1) = 0.9
    # vs_0 - V_0 = 0.9 + 0.9 * c_0(=0.5) * 1.7 = 1.665  vs_0 = 2.665
    # pg_adv_1 = 1 * 1.7 = 1.7
    # pg_adv_0 = 0.5 * (1 + 0.9*3.7 - 1) = 1.665
    out = vtrace(
        values=jnp.array([1.0, 2.0]),
        bootstrap_value=jnp.array(3.0),
        rewards=jnp.array([1.0, 1.0]),
        discounts=jnp.array([0.9, 0.9]),
        log_rhos=jnp.log(jnp.array([0.5, 2.0])),
    )
    close(out.vs, [2.665, 3.7])
    close(out.pg_advantages, [1.665, 1.7])


def test_vtrace_clip_thresholds_are_used():
    # rho-bar = pg-rho-bar = c-bar = 10: rhos [0.5, 2] are not clipped.
    # delta_1 = 2 * 1.7 = 3.4                     vs_1 = 5.4
    # delta_0 = 0.5 * 1.8 = 0.9   vs_0 - V_0 = 0.9 + 0.9 * 0.5 * 3.4 = 2.43   vs_0 = 3.43
    # pg_adv_1 = 2 * 1.7 = 3.4    pg_adv_0 = 0.5 * (1 + 0.9*5.4 - 1) = 2.43
    out = vtrace(
        values=jnp.array([1.0, 2.0]),
        bootstrap_value=jnp.array(3.0),
        rewards=jnp.array([1.0, 1.0]),
        discounts=jnp.array([0.9, 0.9]),
        log_rhos=jnp.log(jnp.array([0.5, 2.0])),
        clip_rho_threshold=10.0,
        clip_pg_rho_threshold=10.0,
        clip_c_threshold=10.0,
    )
    close(out.vs, [3.43, 5.4])
    close(out.pg_advantages, [2.43, 3.4])


def test_vtrace_on_policy_lambda_one_is_the_monte_carlo_return():
    rewards, _, discounts, values, bootstrap, _ = random_rollout(1)
    out = vtrace(values, bootstrap, rewards, discounts, jnp.zeros_like(values))
    # G_t = r_t + discount_t G_{t+1}, G_T = bootstrap (TD(1) with a bootstrap)
    G = np.zeros_like(rewards)
    nxt = bootstrap
    for t in reversed(range(rewards.shape[0])):
        nxt = rewards[t] + discounts[t] * nxt
        G[t] = nxt
    close(out.vs, G)
    close(out.pg_advantages, G - values)
    # and the GAE(lambda=1) returns are the same numbers
    _, gae_returns = gae(rewards, discounts, values, bootstrap, 1.0)
    close(out.vs, gae_returns)


def vtrace_loop(values, bootstrap, rewards, discounts, log_rhos, lam, rho_bar, pg_rho_bar, c_bar):
    """rlax.vtrace_td_error_and_advantage written out as a loop over time."""
    T = values.shape[0]
    rhos = np.exp(log_rhos)
    vs = np.zeros_like(values)
    acc = np.zeros_like(bootstrap)
    for t in reversed(range(T)):
        v_next = bootstrap if t == T - 1 else values[t + 1]
        delta = min_(rho_bar, rhos[t]) * (rewards[t] + discounts[t] * v_next - values[t])
        acc = delta + discounts[t] * lam * min_(c_bar, rhos[t]) * acc
        vs[t] = acc + values[t]
    pg = np.zeros_like(values)
    for t in range(T):
        q_next = bootstrap if t == T - 1 else lam * vs[t + 1] + (1 - lam) * values[t + 1]
        pg[t] = min_(pg_rho_bar, rhos[t]) * (rewards[t] + discounts[t] * q_next - values[t])
    return vs, pg


def min_(a, b):
    return np.minimum(a, b)


@pytest.mark.parametrize(
    "lam,rho_bar,pg_rho_bar,c_bar", [(1.0, 1.0, 1.0, 1.0), (0.5, 2.0, 1.5, 0.9)]
)
def test_vtrace_matches_python_loop_on_random_data(lam, rho_bar, pg_rho_bar, c_bar):
    rewards, _, discounts, values, bootstrap, log_rhos = random_rollout(2)
    out = vtrace(values, bootstrap, rewards, discounts, log_rhos, lam, rho_bar, pg_rho_bar, c_bar)
    vs_ref, pg_ref = vtrace_loop(
        values, bootstrap, rewards, discounts, log_rhos, lam, rho_bar, pg_rho_bar, c_bar
    )
    close(out.vs, vs_ref)
    close(out.pg_advantages, pg_ref)


def test_vtrace_masked_reset_step_does_not_reach_valid_steps():
    # Env 0 is done at t=2, so t=3 is a reset step (mask 0). Whatever happens at t=3
    # (its value, reward, ratio) must not change vs or pg_adv at any other step.
    rewards, _, _, values, bootstrap, log_rhos = random_rollout(3, T=6, N=1)
    dones = np.zeros_like(rewards)
    dones[2] = 1.0
    discounts = 0.9 * (1.0 - dones)
    base = vtrace(values, bootstrap, rewards, discounts, log_rhos)
    v2, r2, l2 = values.copy(), rewards.copy(), log_rhos.copy()
    v2[3] += 100.0
    r2[3] -= 50.0
    l2[3] += 3.0
    other = vtrace(v2, bootstrap, r2, discounts, l2)
    keep = np.arange(6) != 3
    close(other.vs[keep], base.vs[keep])
    close(other.pg_advantages[keep], base.pg_advantages[keep])
    assert not np.allclose(other.vs[3], base.vs[3])  # the change did reach step 3 itself


def test_vtrace_outputs_carry_no_gradient():
    rewards, _, discounts, values, bootstrap, log_rhos = random_rollout(4)

    def f(v, b):
        out = vtrace(v, b, rewards, discounts, log_rhos)
        return jnp.sum(out.vs) + jnp.sum(out.pg_advantages)

    gv, gb = jax.grad(f, argnums=(0, 1))(jnp.asarray(values), jnp.asarray(bootstrap))
    assert np.all(np.asarray(gv) == 0.0) and np.all(np.asarray(gb) == 0.0)


# --------------------------------------------------------------------------------------
# categorical helpers


def test_categorical_helpers_hand_computed():
    logits = jnp.log(jnp.array([[0.25, 0.75], [0.5, 0.5]]))
    close(losses.categorical_logprob(logits, jnp.array([0, 1])), np.log([0.25, 0.5]))
    # H = -(0.25 ln 0.25 + 0.75 ln 0.75) = 0.562335, H(uniform 2) = ln 2
    close(losses.categorical_entropy(logits), [0.5623351446, LN2])
    # logits are only defined up to a constant
    close(losses.categorical_entropy(logits + 7.0), [0.5623351446, LN2])


# --------------------------------------------------------------------------------------
# PPO


def ppo_hand_case():
    # Two actions, new logits all 0 -> pi(a) = 0.5, entropy = ln 2 for every sample.
    # old_logprobs chosen so the ratios are [2, 1, 0.5]: old = ln 0.5 - ln ratio.
    ratios = np.array([2.0, 1.0, 0.5])
    return dict(
        new_logits=jnp.zeros((3, 2)),
        old_logprobs=jnp.asarray(np.log(0.5) - np.log(ratios), dtype=jnp.float32),
        actions=jnp.array([0, 1, 0]),
        advantages=jnp.array([1.0, -1.0, -2.0]),
        new_values=jnp.array([1.0, 2.0, 3.0]),
        returns=jnp.array([2.0, 2.0, 0.0]),
        mask=jnp.ones(3),
    )


def test_ppo_loss_hand_computed_without_normalisation():
    # clip 0.2:
    #  s0: A=1,  r=2:   max(-2,   -1.2) = -1.2   (clipped)
    #  s1: A=-1, r=1:   max(1,    1)    =  1
    #  s2: A=-2, r=0.5: max(1,    1.6)  =  1.6   (clipped)
    #  pg = (-1.2 + 1 + 1.6) / 3 = 1.4 / 3
    # v = 0.5 * mean([1, 0, 9]) = 5/3;  entropy = ln 2
    # approx_kl = mean((r-1) - ln r) = ((1 - ln2) + 0 + (-0.5 + ln2)) / 3 = 0.5/3
    # clipfrac = 2/3;  total = 1.4/3 - 0.01 ln2 + 0.5 * 5/3
    loss, m = ppo_loss(
        **ppo_hand_case(), clip_coef=0.2, ent_coef=0.01, vf_coef=0.5, normalize_advantages=False
    )
    close(m["loss_policy"], 1.4 / 3)
    close(m["loss_value"], 5 / 3)
    close(m["loss_entropy"], LN2)
    close(m["stat_approx_kl"], 0.5 / 3)
    close(m["stat_clipfrac"], 2 / 3)
    close(loss, 1.4 / 3 - 0.01 * LN2 + 0.5 * 5 / 3)
    close(m["loss_total"], loss)
    assert set(m) == {
        "loss_total",
        "loss_policy",
        "loss_value",
        "loss_entropy",
        "stat_approx_kl",
        "stat_clipfrac",
    }


def test_ppo_loss_hand_computed_with_normalisation():
    # A = [1, -1, -2]: mean -2/3, deviations [5, -1, -4]/3, population var 42/27 = 14/9,
    # std = sqrt(14)/3 -> A_norm = [5, -1, -4]/sqrt(14) (eps 1e-8 is below float32 noise).
    #  s0: r=2:   max(-2*5, -1.2*5)/sqrt14 = -6/sqrt14
    #  s1: r=1:   1/sqrt14
    #  s2: r=0.5: max(0.5*4, 0.8*4)/sqrt14 = 3.2/sqrt14
    #  pg = (-6 + 1 + 3.2) / (3 sqrt14) = -1.8 / (3 sqrt14)
    _, m = ppo_loss(**ppo_hand_case(), clip_coef=0.2, ent_coef=0.01, vf_coef=0.5)
    close(m["loss_policy"], -1.8 / (3 * math.sqrt(14)))


def test_ppo_ratio_one_gives_zero_policy_loss():
    rng = np.random.default_rng(5)
    logits = jnp.asarray(rng.normal(size=(16, 4)), dtype=jnp.float32)
    actions = jnp.asarray(rng.integers(0, 4, size=16))
    adv = jnp.asarray(rng.normal(loc=3.0, size=16), dtype=jnp.float32)
    old = losses.categorical_logprob(logits, actions)
    _, m = ppo_loss(
        logits, old, actions, adv, jnp.zeros(16), jnp.zeros(16), jnp.ones(16), 0.1, 0.01, 0.5
    )
    # ratio == 1: pg = -mean(normalised A) = 0; kl and clipfrac are 0.
    close(m["loss_policy"], 0.0)
    close(m["stat_approx_kl"], 0.0)
    close(m["stat_clipfrac"], 0.0)
    _, m_raw = ppo_loss(
        logits,
        old,
        actions,
        adv,
        jnp.zeros(16),
        jnp.zeros(16),
        jnp.ones(16),
        0.1,
        0.01,
        0.5,
        normalize_advantages=False,
    )
    close(m_raw["loss_policy"], -np.mean(np.asarray(adv)))


def test_ppo_masked_entries_change_neither_loss_nor_gradient():
    rng = np.random.default_rng(6)
    B, A = 12, 3
    valid = dict(
        new_logits=rng.normal(size=(B, A)),
        old_logprobs=np.log(rng.uniform(0.2, 0.6, size=B)),
        actions=rng.integers(0, A, size=B),
        advantages=rng.normal(size=B),
        new_values=rng.normal(size=B),
        returns=rng.normal(size=B),
    )
    garbage = dict(  # 4 masked entries with extreme numbers
        new_logits=np.full((4, A), 80.0) * np.array([1.0, -1.0, 0.0]),
        old_logprobs=np.full(4, -90.0),
        actions=np.zeros(4, dtype=int),
        advantages=np.full(4, 1e6),
        new_values=np.full(4, 1e4),
        returns=np.full(4, -1e4),
    )
    small = {
        k: jnp.asarray(v, dtype=jnp.int32 if k == "actions" else jnp.float32)
        for k, v in valid.items()
    }
    big = {
        k: jnp.asarray(np.concatenate([valid[k], garbage[k]]), dtype=small[k].dtype) for k in valid
    }
    mask_big = jnp.concatenate([jnp.ones(B), jnp.zeros(4)])

    def run(batch, mask):
        def f(logits, values):
            b = dict(batch, new_logits=logits, new_values=values)
            return ppo_loss(**b, mask=mask, clip_coef=0.1, ent_coef=0.01, vf_coef=0.5)

        (loss, m), grads = jax.jit(jax.value_and_grad(f, argnums=(0, 1), has_aux=True))(
            batch["new_logits"], batch["new_values"]
        )
        return loss, m, grads

    loss_s, m_s, (gl_s, gv_s) = run(small, jnp.ones(B))
    loss_b, m_b, (gl_b, gv_b) = run(big, mask_big)
    close(loss_b, loss_s)
    for k in m_s:
        close(m_b[k], m_s[k])
    close(gl_b[:B], gl_s)
    close(gv_b[:B], gv_s)
    assert np.all(np.asarray(gl_b[B:]) == 0.0) and np.all(np.asarray(gv_b[B:]) == 0.0)


def test_ppo_loss_works_on_time_major_arrays():
    rng = np.random.default_rng(7)
    T, N, A = 4, 3, 2
    args = (
        jnp.asarray(rng.normal(size=(T, N, A)), dtype=jnp.float32),
        jnp.asarray(rng.normal(size=(T, N)) - 1.0, dtype=jnp.float32),
        jnp.asarray(rng.integers(0, A, size=(T, N))),
        jnp.asarray(rng.normal(size=(T, N)), dtype=jnp.float32),
        jnp.asarray(rng.normal(size=(T, N)), dtype=jnp.float32),
        jnp.asarray(rng.normal(size=(T, N)), dtype=jnp.float32),
        jnp.ones((T, N)),
    )
    loss_tm, _ = ppo_loss(*args, 0.1, 0.01, 0.5)
    flat = [x.reshape((T * N,) + x.shape[2:]) for x in args]
    loss_flat, _ = ppo_loss(*flat, 0.1, 0.01, 0.5)
    close(loss_tm, loss_flat)


# --------------------------------------------------------------------------------------
# IMPALA


def impala_hand_case():
    # T=2, N=1, 2 actions. New logits 0 -> pi = 0.5, entropy ln 2.
    # Behaviour: step 0 mu = [0.25, 0.75], action 0 -> rho = 0.5/0.25 = 2
    #            step 1 mu = [0.2, 0.8],   action 1 -> rho = 0.5/0.8  = 0.625
    return dict(
        new_logits=jnp.zeros((2, 1, 2)),
        behaviour_logits=jnp.log(jnp.array([[[0.25, 0.75]], [[0.2, 0.8]]])),
        actions=jnp.array([[0], [1]]),
        values=jnp.array([[1.0], [2.0]]),
        bootstrap_value=jnp.array([3.0]),
        rewards=jnp.array([[1.0], [1.0]]),
        discounts=jnp.array([[0.9], [0.9]]),
        mask=jnp.ones((2, 1)),
    )


# V-trace of the hand case: clipped rho = [1, 0.625], c = [1, 0.625]
#  delta_1 = 0.625 * (1 + 0.9*3 - 2) = 1.0625            vs_1 = 3.0625
#  delta_0 = 1 * (1 + 0.9*2 - 1) = 1.8
#  vs_0 - V_0 = 1.8 + 0.9 * 1 * 1.0625 = 2.75625          vs_0 = 3.75625
#  pg_adv_1 = 0.625 * 1.7 = 1.0625;  pg_adv_0 = 1 * (1 + 0.9*3.0625 - 1) = 2.75625
IMPALA_PG = LN2 * (2.75625 + 1.0625)  # sum(-ln 0.5 * pg_adv)
IMPALA_V = 0.5 * (2.75625**2 + 1.0625**2)  # 0.5 * sum((vs - V)^2) = 4.36291015625
IMPALA_ENT = -2 * LN2  # -sum(entropy)


def test_impala_loss_hand_computed():
    loss, m = impala_loss(**impala_hand_case(), baseline_cost=0.5, entropy_cost=0.01)
    close(m["loss_policy"], IMPALA_PG)
    close(m["loss_value"], IMPALA_V)
    close(m["loss_entropy"], IMPALA_ENT)
    close(m["stat_mean_rho"], (2.0 + 0.625) / 2)
    close(loss, IMPALA_PG + 0.5 * IMPALA_V + 0.01 * IMPALA_ENT)
    close(m["loss_total"], loss)
    assert set(m) == {"loss_total", "loss_policy", "loss_value", "loss_entropy", "stat_mean_rho"}


def test_impala_loss_is_a_sum_over_valid_steps():
    # Masking step 1 removes exactly its terms (sum, not mean: nothing is rescaled).
    case = impala_hand_case()
    case["mask"] = jnp.array([[1.0], [0.0]])
    _, m = impala_loss(**case)
    close(m["loss_policy"], LN2 * 2.75625)
    close(m["loss_value"], 0.5 * 2.75625**2)
    close(m["loss_entropy"], -LN2)
    close(m["stat_mean_rho"], 2.0)


def test_impala_gradients_reach_values_only_through_the_value_loss():
    case = impala_hand_case()
    vs = np.array([[3.75625], [3.0625]])

    def f(new_logits, behaviour_logits, values, bootstrap_value):
        c = dict(
            case,
            new_logits=new_logits,
            behaviour_logits=behaviour_logits,
            values=values,
            bootstrap_value=bootstrap_value,
        )
        return impala_loss(**c, baseline_cost=0.5)[0]

    g_logits, g_beh, g_values, g_boot = jax.jit(jax.grad(f, argnums=(0, 1, 2, 3)))(
        case["new_logits"], case["behaviour_logits"], case["values"], case["bootstrap_value"]
    )
    # d/dV [0.5 * 0.5 * (sg(vs) - V)^2] = -0.5 * (vs - V): no path through vs or pg_adv.
    close(g_values, -0.5 * (vs - np.asarray(case["values"])))
    # the bootstrap value and the behaviour logits only enter targets and ratios
    assert np.all(np.asarray(g_boot) == 0.0)
    assert np.all(np.asarray(g_beh) == 0.0)
    # policy gradient of -logpi(a) * adv - 0.01 * H at uniform logits:
    # d(-log pi(a))/dz = pi - onehot(a); dH/dz = 0 at the uniform policy.
    pi = np.full((2, 1, 2), 0.5)
    onehot = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
    adv = np.array([2.75625, 1.0625])[:, None, None]
    close(g_logits, (pi - onehot) * adv)


def test_impala_masked_reset_step_changes_nothing():
    # Env done at t=1 -> t=2 is a reset step. Its logits, value, reward and behaviour
    # logits are garbage; loss and gradients of the valid steps must not move.
    rng = np.random.default_rng(8)
    T, N, A = 4, 2, 3
    case = dict(
        new_logits=rng.normal(size=(T, N, A)),
        behaviour_logits=rng.normal(size=(T, N, A)),
        actions=rng.integers(0, A, size=(T, N)),
        values=rng.normal(size=(T, N)),
        bootstrap_value=rng.normal(size=(N,)),
        rewards=rng.normal(size=(T, N)),
        discounts=np.full((T, N), 0.9),
        mask=np.ones((T, N)),
    )
    case["discounts"][1, 0] = 0.0
    case["mask"][2, 0] = 0.0
    case = {
        k: jnp.asarray(v, dtype=jnp.int32 if k == "actions" else jnp.float32)
        for k, v in case.items()
    }
    changed = dict(case)
    changed["new_logits"] = case["new_logits"].at[2, 0].set(jnp.array([30.0, -30.0, 0.0]))
    changed["behaviour_logits"] = case["behaviour_logits"].at[2, 0].add(5.0)
    changed["values"] = case["values"].at[2, 0].add(100.0)
    changed["rewards"] = case["rewards"].at[2, 0].add(-7.0)

    def loss_and_grads(c):
        def f(logits, values):
            return impala_loss(**dict(c, new_logits=logits, values=values))

        grad_fn = jax.jit(jax.value_and_grad(f, argnums=(0, 1), has_aux=True))
        return grad_fn(c["new_logits"], c["values"])

    (l0, m0), (gl0, gv0) = loss_and_grads(case)
    (l1, m1), (gl1, gv1) = loss_and_grads(changed)
    close(l1, l0)
    for k in m0:
        close(m1[k], m0[k])
    close(gl1, gl0)
    close(gv1, gv0)
    assert np.all(np.asarray(gl1[2, 0]) == 0.0) and float(gv1[2, 0]) == 0.0


def test_impala_loss_rejects_batch_major_logits():
    case = impala_hand_case()
    case["new_logits"] = jnp.zeros((1, 2, 2))
    with pytest.raises(ValueError, match=r"\(T, N, A\)"):
        impala_loss(**case)
