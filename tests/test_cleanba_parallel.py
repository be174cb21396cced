"""The learner's one cross-device reduction averages per-device gradients.

Under shard_map the gradient with respect to replicated params is implicitly summed over
devices; without the per-device cast a pmean then returns L times the mean gradient.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cleanba.numerics.parallel import LearnerMesh, learner_value_and_grad


@pytest.mark.parametrize("learner_ids", [[0], [0, 1], [0, 1, 2, 3]])
def test_gradient_is_the_mean_over_learner_devices(learner_ids):
    if jax.device_count() < len(learner_ids):
        pytest.skip(f"needs {len(learner_ids)} devices (XLA_FLAGS device count)")
    mesh = LearnerMesh(learner_ids)

    def step(w, x):
        # d/dw mean(w * x) = mean(x): device k holds x = k + 1, so the average is mean(1..L)
        return learner_value_and_grad(lambda w: (jnp.mean(w * x), {"loss": jnp.mean(w * x)}), w)

    f = mesh.map(step, in_split=[False, True], out_split=[False, False])
    n = len(learner_ids)
    x = np.ones((n, 4), np.float32) * np.arange(1, n + 1, dtype=np.float32)[:, None]
    grads, metrics = f(mesh.replicate(np.float32(3.0)), mesh.shard(x))
    assert float(grads) == pytest.approx(np.mean(np.arange(1, n + 1)))
    assert float(metrics["loss"]) == pytest.approx(3.0 * np.mean(np.arange(1, n + 1)))
