"""Layout-independent numerics of cleanba/numerics/deterministic.py: bit-identical results for any
split of the same work over calls, devices and processes.

The multi-device tests need XLA_FLAGS=--xla_force_host_platform_device_count=4 (set by
scripts/test.sh) and skip with the reason otherwise.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from cleanba.numerics import deterministic as det
from cleanba.numerics.losses import gae, ppo_loss
from cleanba.numerics.networks import init_params, make_network

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("deterministic_learner_step",
                                               HERE / "deterministic_learner_step.py")
step_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(step_mod)

MLP_OBS = (16,)
CONV_OBS = (4, 24, 24)  # IMPALA ResNet torso (channels 8, 16) on small frames: fast to compile


def need_devices(n: int) -> None:
    if jax.device_count() < n:
        pytest.skip(f"needs {n} devices, have {jax.device_count()}: run with "
                    f"XLA_FLAGS=--xla_force_host_platform_device_count=4 (scripts/test.sh)")


def as_bytes(tree) -> bytes:
    return b"".join(np.ascontiguousarray(x).tobytes() for x in jax.tree.leaves(jax.device_get(tree)))


def wide_floats(shape, seed=0) -> np.ndarray:
    """float32 values over many magnitudes and both signs: sums depend on the order."""
    rng = np.random.default_rng(seed)
    return (rng.choice([-1.0, 1.0], size=shape) * 10.0 ** rng.uniform(-3, 5, size=shape)).astype(
        np.float32)


# --------------------------------------------------------------------------------------
# fixed-order sums


def test_pairwise_sum_adds_neighbours_first():
    # Sequentially ((1e8 + 1) - 1e8) + 1 = 1 in float32; pairwise (1e8 + 1) + (-1e8 + 1):
    # 1e8 + 1 rounds to 1e8 and -1e8 + 1 to -1e8, so the tree gives 0.
    x = np.array([1e8, 1.0, -1e8, 1.0], np.float32)
    assert float(det.pairwise_sum(jnp.asarray(x))) == 0.0
    # odd counts carry the last element: [1, 2, 3] -> [3, 3] -> 6; trees of arrays work too
    tree = {"a": jnp.array([1.0, 2.0, 3.0]), "b": jnp.arange(6.0).reshape(3, 2)}
    out = det.pairwise_sum(tree)
    assert float(out["a"]) == 6.0 and out["b"].tolist() == [6.0, 9.0]
    with pytest.raises(ValueError, match="at least one"):
        det.pairwise_sum(jnp.zeros((0, 2)))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 8, 11, 12, 13, 16, 23])
def test_pairwise_accumulator_is_the_same_tree(n):
    x = wide_floats((n, 5), seed=n)
    acc = det.PairwiseAccumulator()
    for row in x:
        acc.add(jnp.asarray(row))
    assert acc.count == n
    assert as_bytes(acc.result()) == as_bytes(det.pairwise_sum(jnp.asarray(x)))


def test_fixed_order_sum_same_bits_on_1_2_3_4_devices_and_psum_not():
    need_devices(4)
    x = wide_floats((12, 257))
    reference = as_bytes(det.pairwise_sum(jnp.asarray(x)))
    psum_results = {}
    for num in (1, 2, 3, 4):  # 12 / num = 12, 6, 4, 3 per device: both gather paths
        mesh = Mesh(np.array(jax.devices()[:num]), ("d",))
        fixed = jax.jit(jax.shard_map(lambda v: det.fixed_order_sum(v, "d"), mesh=mesh,
                                      in_specs=P("d"), out_specs=P()))
        assert as_bytes(fixed(x)) == reference, f"{num} devices"
        plain = jax.jit(jax.shard_map(lambda v: jax.lax.psum(jnp.sum(v, 0), "d"), mesh=mesh,
                                      in_specs=P("d"), out_specs=P()))
        psum_results[num] = np.asarray(plain(x))
    # The usual reduction (local sum, then psum) changes with the device count.
    assert any(as_bytes(psum_results[n]) != as_bytes(psum_results[1]) for n in (2, 3, 4))
    for n in (2, 3, 4):
        np.testing.assert_allclose(psum_results[n], psum_results[1], rtol=1e-5, atol=1e-2)


# --------------------------------------------------------------------------------------
# 1. inference, 2. sampling


@functools.cache
def network_and_params(obs_shape: tuple[int, ...], full_size: bool = False):
    if full_size:
        network = make_network(obs_shape, 6)
    else:
        network = make_network(obs_shape, 6, channels=(8, 16), hidden=64)
    return network, init_params(network, obs_shape, jax.random.PRNGKey(1))


def observations(obs_shape, n, seed=0):
    rng = np.random.default_rng(seed)
    if len(obs_shape) == 3:
        return rng.integers(0, 256, size=(n, *obs_shape), dtype=np.uint8)
    return rng.standard_normal((n, *obs_shape)).astype(np.float32)


@pytest.mark.parametrize("obs_shape", [MLP_OBS, (4, 84, 84)], ids=["mlp", "impala_resnet"])
def test_microbatched_apply_same_bits_for_any_split(obs_shape):
    need_devices(2)
    network, params = network_and_params(obs_shape, full_size=True)
    obs = observations(obs_shape, 8)
    apply = jax.jit(functools.partial(det.microbatched_apply, network.apply, microbatch_size=4))
    whole = apply(params, obs)
    assert whole[0].shape == (8, 6) and whole[1].shape == (8,)
    dev0, dev1 = jax.devices()[:2]
    halves = [apply(jax.device_put(params, d), jax.device_put(obs[i:i + 4], d))
              for d, i in ((dev0, 0), (dev1, 4))]
    split = jax.tree.map(lambda *xs: np.concatenate(xs), *halves)
    assert as_bytes(split) == as_bytes(whole)
    mesh = Mesh(np.array([dev0, dev1]), ("actors",))
    sharded = jax.jit(jax.shard_map(
        lambda p, o: det.microbatched_apply(network.apply, p, o, 4), mesh=mesh,
        in_specs=(P(), P("actors")), out_specs=P("actors")))
    assert as_bytes(sharded(params, obs)) == as_bytes(whole)
    # and the outputs are the network's (up to rounding)
    np.testing.assert_allclose(whole[0], network.apply(params, obs)[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="micro-batch size must divide"):
        det.microbatched_apply(network.apply, params, obs[:6], 4)


@pytest.mark.parametrize("key_fn", [jax.random.PRNGKey, jax.random.key], ids=["raw", "typed"])
def test_sample_actions_depend_on_global_env_index_and_step_only(key_fn):
    run_key = key_fn(7)
    logits = jnp.asarray(np.random.default_rng(0).standard_normal((64, 6)), jnp.float32)
    envs = jnp.arange(100, 164, dtype=jnp.int32)  # e.g. the second actor's block of envs
    sample = jax.jit(det.sample_actions)
    whole = np.asarray(sample(run_key, logits, envs, 5))
    parts = [np.asarray(sample(run_key, logits[i:i + 16], envs[i:i + 16], 5))
             for i in range(0, 64, 16)]
    assert np.array_equal(np.concatenate(parts), whole)
    # a single env alone, in reverse order, on another device: the same actions
    env9 = np.asarray(sample(run_key, logits[9:10], envs[9:10], 5))
    assert env9[0] == whole[9]
    flipped = np.asarray(sample(run_key, logits[::-1], envs[::-1], 5))
    assert np.array_equal(flipped[::-1], whole)
    # fresh randomness per step and per env (64 envs x 6 actions: never all equal)
    assert not np.array_equal(np.asarray(sample(run_key, logits, envs, 6)), whole)
    same_logits = jnp.zeros((64, 6))
    assert len(set(np.asarray(sample(run_key, same_logits, envs, 5)).tolist())) > 1
    assert whole.dtype == np.int32 and whole.min() >= 0 and whole.max() < 6


def test_microbatched_policy_step_matches_its_parts():
    network, params = network_and_params(MLP_OBS)
    obs = observations(MLP_OBS, 8)
    key, envs = jax.random.key(3), jnp.arange(8, dtype=jnp.int32)
    step = jax.jit(det.microbatched_policy_step, static_argnums=(0, 6))
    actions, logprobs, logits, values = step(network.apply, params, obs, key, envs, 2, 4)
    half = step(network.apply, params, obs[4:], key, envs[4:], 2, 4)
    assert as_bytes(half) == as_bytes(tuple(x[4:] for x in (actions, logprobs, logits, values)))
    expected = jax.nn.log_softmax(logits)[jnp.arange(8), actions]
    np.testing.assert_allclose(logprobs, expected, rtol=1e-6)


def test_gae_of_an_env_does_not_depend_on_the_other_envs():
    # Learner devices compute GAE on their own env slice: per-env recursions must not
    # depend on how many envs share the array.
    rng = np.random.default_rng(0)
    t, n = 16, 8
    rewards = wide_floats((t, n), seed=1)
    discounts = (0.99 * (rng.random((t, n)) > 0.05)).astype(np.float32)
    values, boot = wide_floats((t, n), seed=2), wide_floats((n,), seed=3)
    fn = jax.jit(functools.partial(gae, lambda_=0.95))
    whole = fn(rewards, discounts, values, boot)
    for lo, hi in ((0, 4), (4, 8), (3, 4)):
        part = fn(rewards[:, lo:hi], discounts[:, lo:hi], values[:, lo:hi], boot[lo:hi])
        assert as_bytes(part) == as_bytes(tuple(x[:, lo:hi] for x in whole))


# --------------------------------------------------------------------------------------
# 3. gradients of a minibatch


@functools.cache
def learner_step(obs_shape, num_microbatches, num_devices, kind="deterministic",
                 optimizer="adam"):
    """(grads, params, ...) of one learner step, as host numpy arrays."""
    mesh = step_mod.make_mesh(jax.devices()[:num_devices])
    out = step_mod.run_in_process_mesh(mesh, obs_shape, num_microbatches, kind, optimizer)
    return jax.device_get(out)


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_deterministic_grad_same_bits_on_1_2_4_learner_devices(optimizer):
    need_devices(4)
    # 8 micro-batches of 8: 8, 4, 2 per device (block sums cross devices)
    one = learner_step(MLP_OBS, 8, 1, optimizer=optimizer)
    for num in (2, 4) if optimizer == "adam" else (4,):
        other = learner_step(MLP_OBS, 8, num, optimizer=optimizer)
        for what, a, b in zip(("grads", "params", "opt_state", "metrics"), one, other,
                              strict=True):
            assert as_bytes(a) == as_bytes(b), f"{what} differ on {num} devices"


def test_deterministic_grad_same_bits_when_blocks_are_not_powers_of_two():
    need_devices(4)
    # 12 micro-batches: 12, 4, 3 per device (3 gathers every micro-batch; 3 devices
    # finish the tree with an odd one out)
    one = learner_step(MLP_OBS, 12, 1)
    for num in (3, 4):
        assert as_bytes(learner_step(MLP_OBS, 12, num)[:2]) == as_bytes(one[:2]), f"{num}"


@pytest.mark.slow
def test_deterministic_grad_same_bits_on_1_2_learner_devices_resnet():
    need_devices(4)
    # 4 micro-batches: 4, 2 per device (the MLP tests cover 4 devices)
    one = learner_step(CONV_OBS, 4, 1)
    assert as_bytes(learner_step(CONV_OBS, 4, 2)) == as_bytes(one)


def test_deterministic_grad_is_the_ppo_minibatch_gradient():
    # Micro-batch sums with minibatch advantage statistics = CleanRL's ppo_loss on the
    # whole minibatch (normalised advantages, masked means), up to rounding.
    network, params, mbs = step_mod.make_problem(MLP_OBS, 8)
    flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), mbs)

    def reference_loss(p):
        logits, values = network.apply(p, flat["obs"])
        return ppo_loss(logits, flat["logprobs"], flat["actions"], flat["advantages"], values,
                        flat["returns"], flat["mask"], step_mod.CLIP, step_mod.ENT, step_mod.VF)

    (loss, metrics), expected = jax.value_and_grad(reference_loss, has_aux=True)(params)
    grads, _, _, got_metrics = learner_step(MLP_OBS, 8, 1)
    for g, e in zip(jax.tree.leaves(grads), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(got_metrics["loss"], loss, rtol=1e-5)
    for name in ("loss_policy", "loss_value", "loss_entropy", "stat_approx_kl"):
        np.testing.assert_allclose(got_metrics[name], metrics[name], rtol=1e-5, atol=1e-7)


def test_pmean_of_device_gradients_is_not_bit_identical():
    need_devices(4)
    results = {n: learner_step(MLP_OBS, 8, n, kind="pmean") for n in (1, 2, 4)}
    differing = [n for n in (2, 4) if as_bytes(results[n][0]) != as_bytes(results[1][0])]
    assert differing, "pmean happened to be bit-identical: the contrast needs larger sizes"
    for n in (2, 4):  # the same gradient up to rounding
        for a, b in zip(jax.tree.leaves(results[n][0]), jax.tree.leaves(results[1][0]),
                        strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("obs_shape", [MLP_OBS, pytest.param(CONV_OBS, marks=pytest.mark.slow)],
                         ids=["mlp", "resnet"])
def test_host_loop_gradient_same_bits_on_1_2_4_learner_devices(obs_shape):
    need_devices(4)
    one = learner_step(obs_shape, 4, 1, kind="host_loop")
    for num in (2, 4) if obs_shape == MLP_OBS else (2,):
        assert as_bytes(learner_step(obs_shape, 4, num, kind="host_loop")) == as_bytes(one)
    # the same step as the single-program path up to rounding (bits may differ: the
    # loop body and a standalone call are compiled separately)
    for a, b in zip(jax.tree.leaves(one[0]), jax.tree.leaves(learner_step(obs_shape, 4, 1)[0]),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_combine_block_sums_needs_power_of_two_blocks():
    with pytest.raises(ValueError, match="power-of-two number of micro-batches"):
        det.combine_block_sums(jnp.zeros(3), 3, "d")


def test_params_checksum_is_stable_and_sensitive():
    _, params = network_and_params(MLP_OBS)
    digest = det.params_checksum(params)
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert det.params_checksum(jax.tree.map(np.array, params)) == digest
    bumped = jax.tree.map(lambda x: x, params)
    leaf = np.array(bumped["params"]["actor"]["bias"])
    leaf[0] = np.nextafter(leaf[0], np.float32(1))  # one ulp
    bumped["params"]["actor"]["bias"] = leaf
    assert det.params_checksum(bumped) != digest


# --------------------------------------------------------------------------------------
# 4. across processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("devices_per_process", [1, 2])
def test_two_processes_give_the_single_process_bits(devices_per_process):
    need_devices(1)
    num_microbatches = 8
    port = free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices_per_process}"}
    procs = [subprocess.Popen(
        [sys.executable, str(HERE / "deterministic_learner_step.py"), str(i), "2", str(port),
         str(num_microbatches)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for i in range(2)]
    outputs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, f"worker failed:\n{err[-3000:]}"
            line = next(x for x in out.splitlines() if x.startswith("RESULT "))
            outputs.append(json.loads(line[len("RESULT "):]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    grads, params, _, metrics = learner_step(MLP_OBS, num_microbatches, 1)
    expected = {"grads": step_mod.digest(grads), "params": step_mod.digest(params),
                "metrics": step_mod.digest(metrics)}
    for out in outputs:
        assert out["devices"] == 2 * devices_per_process
        assert {k: out[k] for k in expected} == expected, f"process {out['process']}"


# --------------------------------------------------------------------------------------
# the trainers' FixedOrderGradient


@pytest.mark.parametrize("one_program", [False, True])
@pytest.mark.parametrize("learners", [1, 2, 4])
def test_fixed_order_gradient_is_the_pairwise_sum_of_group_gradients_on_any_mesh(learners,
                                                                                 one_program):
    """4 env groups of wide-range data, a linear 'network'; the step's summed gradient
    equals pairwise_sum of the 4 per-group gradients, bit for bit, on 1, 2 or 4 devices."""
    need_devices(learners)
    from flax.training.train_state import TrainState

    from cleanba.numerics.parallel import LearnerMesh

    groups, per_group, dim = 4, 8, 16
    data = wide_floats((groups, per_group, dim), seed=5)
    weights = jnp.asarray(wide_floats((dim,), seed=6) * 1e-3)

    def group_loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    expected = det.pairwise_sum(jnp.stack([jax.grad(group_loss)(weights, data[g])
                                           for g in range(groups)]))

    def select(local_data, k):
        return local_data[k]

    def microbatch_loss(params, x):
        return group_loss(params["w"], x), {"count": jnp.float32(per_group)}

    def finish(state, grads, sums):
        return state, {"grad": grads["w"], "count": sums["count"]}

    import optax

    mesh = LearnerMesh(list(range(learners)))
    state = mesh.replicate(TrainState.create(apply_fn=None, params={"w": weights},
                                             tx=optax.sgd(0.1)))
    step = det.FixedOrderGradient(mesh, select, microbatch_loss, (True,), finish,
                                  groups // learners, one_program)
    local = data.reshape(learners, groups // learners, per_group, dim)
    _, out = step(state, mesh.shard(local))
    got = jax.device_get(out["grad"].addressable_shards[0].data)
    assert as_bytes(got) == as_bytes(expected)
    assert float(out["count"].addressable_shards[0].data) == groups * per_group


def test_fixed_order_gradient_refuses_a_non_power_of_two_block():
    from cleanba.numerics.parallel import LearnerMesh

    with pytest.raises(ValueError, match="power-of-two number of env groups"):
        det.FixedOrderGradient(LearnerMesh([0]), lambda *a: None, lambda *a: None, (True,),
                               lambda *a: None, 3)
