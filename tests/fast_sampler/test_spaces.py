"""Observation layouts: byte round-trips for every supported space, a clear error otherwise."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from fast_sampler.spaces import ObsLayout

SPACE = gym.spaces.Dict(
    {
        "bev": gym.spaces.Box(0, 255, (3, 5, 7), np.uint8),
        "command": gym.spaces.Discrete(7),
        "flags": gym.spaces.MultiBinary(3),
        "state": gym.spaces.Box(-1.0, 1.0, (10,), np.float32),
    }
)


def test_dict_observation_round_trips_through_a_byte_buffer_and_a_batch() -> None:
    SPACE.seed(0)
    layout = ObsLayout(SPACE)
    obs = SPACE.sample()
    buffer = memoryview(bytearray(layout.nbytes))
    layout.write(buffer, obs)
    restored = layout.read(buffer)
    batch = layout.allocate((4,))
    layout.set_row(batch, 2, restored)
    for key, value in obs.items():
        np.testing.assert_array_equal(restored[key], value)
        np.testing.assert_array_equal(batch[key][2], value)
        assert batch[key].shape == (4, *SPACE[key].shape) and batch[key].dtype == SPACE[key].dtype
    assert all(spec.offset_bytes % 64 == 0 for spec in layout.specs)


def test_unsupported_spaces_are_named() -> None:
    with pytest.raises(ValueError, match=r"observation_space\['text'\]: Text is not supported"):
        ObsLayout(gym.spaces.Dict({"text": gym.spaces.Text(5)}))


def test_a_plain_observation_must_match_a_dict_space() -> None:
    layout = ObsLayout(SPACE)
    with pytest.raises(ValueError, match="expected a dict with keys"):
        layout.write(memoryview(bytearray(layout.nbytes)), np.zeros(3))
