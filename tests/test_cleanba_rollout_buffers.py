"""cleanba.core.rollout_buffers: a rollout's memory is written again only once nothing
refers to it."""

import gc

import jax
import numpy as np
import pytest

from cleanba.core.rollout_buffers import RolloutBuffers

LAYOUT = {"obs": ((5, 3, 2), np.uint8), "values": ((4, 3), np.float32)}


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def take_addresses(buffers: RolloutBuffers) -> dict[str, int]:
    """Take a set and let go of it at once; where its memory lies."""
    return {name: address(a) for name, a in buffers.take().items()}


def test_take_gives_the_layout_shapes_and_dtypes_writable():
    arrays = RolloutBuffers(LAYOUT).take()
    assert {n: (a.shape, a.dtype) for n, a in arrays.items()} == {
        "obs": ((5, 3, 2), np.dtype(np.uint8)), "values": ((4, 3), np.dtype(np.float32))}
    arrays["obs"][1] = 7
    assert (arrays["obs"][1] == 7).all()


def test_a_set_nothing_refers_to_is_reused():
    buffers = RolloutBuffers(LAYOUT)
    first = take_addresses(buffers)
    gc.collect()
    assert take_addresses(buffers) == first
    assert buffers.allocated == 1


def part_of(arrays: dict[str, np.ndarray], hold: str) -> object:
    """What a learner may keep of a rollout's arrays."""
    if hold == "the dict":
        return arrays
    if hold == "one array":
        return arrays["values"]
    if hold == "a view of a view":
        return arrays["obs"][:-1][None, 1:]
    return [arrays["values"]]  # a concatenation's input list


@pytest.mark.parametrize("hold", ["the dict", "one array", "a view of a view",
                                  "a concatenation's input list"])
def test_a_set_still_referred_to_is_not_handed_out(hold):
    buffers = RolloutBuffers(LAYOUT)
    arrays = buffers.take()
    kept = part_of(arrays, hold)
    before = {name: address(a) for name, a in arrays.items()}
    del arrays
    gc.collect()
    assert all(address(a) != before[name] for name, a in buffers.take().items())
    assert buffers.allocated == 2
    del kept
    gc.collect()
    assert take_addresses(buffers) == before  # let go of now: the first set comes back


@pytest.mark.parametrize("shape", [(5, 3, 2), (129, 8, 4, 84, 84)])  # small; a rollout's size
def test_a_device_array_made_from_a_set_keeps_its_values_when_sets_are_reused(shape):
    """The learner's device_put may copy or alias the host memory; either way, writing the
    next rollouts must not change what the device array holds."""
    buffers = RolloutBuffers({"obs": (shape, np.uint8)})
    arrays = buffers.take()
    arrays["obs"][...] = 3
    on_device = jax.device_put(arrays["obs"][:-1][None])
    del arrays
    gc.collect()
    for _ in range(3):
        buffers.take()["obs"].fill(255)
    assert (np.asarray(on_device) == 3).all()


def test_at_most_keep_sets_are_kept_then_fresh_ones():
    buffers = RolloutBuffers(LAYOUT, keep=2)
    held = [buffers.take() for _ in range(3)]
    assert buffers.allocated == 3
    kept = {address(h["obs"]) for h in held[:2]}
    del held
    gc.collect()
    held = [buffers.take() for _ in range(3)]
    assert {address(h["obs"]) for h in held[:2]} == kept  # the kept two come back
    assert address(held[2]["obs"]) not in kept and buffers.allocated == 4  # the third is new


def test_keep_zero_always_allocates():
    buffers = RolloutBuffers(LAYOUT, keep=0)
    take_addresses(buffers)
    take_addresses(buffers)
    assert buffers.allocated == 2


def test_negative_keep_is_refused():
    with pytest.raises(ValueError, match="keep"):
        RolloutBuffers(LAYOUT, keep=-1)
