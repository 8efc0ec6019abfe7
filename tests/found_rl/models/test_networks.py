"""Encoders and heads: shapes, configurable widths, observation checks."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from found_rl.algos.augment import random_shift
from found_rl.models import (
    ActionKind,
    ActorCritic,
    EncoderConfig,
    ObsSpec,
    make_encoder,
    obs_spec_from_space,
    obs_to_tensor,
)
from found_rl.models.ppo_nets import action_kind_for_space
from found_rl.state_vector import STATE_SIZE

DRIVING_SPACE = gym.spaces.Dict(
    {
        "bev": gym.spaces.Box(0, 255, (15, 96, 96), np.uint8),
        "state": gym.spaces.Box(-np.inf, np.inf, (STATE_SIZE,), np.float32),
    }
)


def test_default_driving_encoder_layout():
    spec = obs_spec_from_space(DRIVING_SPACE)
    encoder = make_encoder(spec)
    convs = [m for m in encoder.cnn if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (32, (3, 3), (2, 2)),
        (64, (3, 3), (2, 2)),
        (128, (3, 3), (2, 2)),
        (256, (3, 3), (2, 2)),
        (64, (1, 1), (1, 1)),
    ]
    obs = {
        "bev": torch.zeros(3, 15, 96, 96, dtype=torch.uint8),
        "state": torch.zeros(3, STATE_SIZE),
    }
    assert encoder(obs).shape == (3, 256)


def test_small_encoder_for_cpu_runs():
    spec = ObsSpec(bev_shape=(15, 96, 96), state_dim=10)
    small = make_encoder(
        spec,
        EncoderConfig(
            conv_channels=(8, 8, 16, 16),
            bottleneck_channels=8,
            state_hidden=(32,),
            features_dim=64,
        ),
    )
    obs = {
        "bev": torch.zeros(2, 15, 96, 96, dtype=torch.uint8),
        "state": torch.zeros(2, 10),
    }
    assert small(obs).shape == (2, 64)
    assert sum(p.numel() for p in small.parameters()) < sum(p.numel() for p in make_encoder(spec).parameters()) / 10


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Box(0, 1, (3, 4, 4)),
        gym.spaces.Discrete(3),
        gym.spaces.Dict(
            {
                "bev": gym.spaces.Box(0, 1, (3, 4, 4), np.float32),
                "state": gym.spaces.Box(0, 1, (2,)),
            }
        ),
        gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (3, 4, 4), np.uint8)}),
    ],
)
def test_unsupported_observation_spaces_are_refused(space):
    with pytest.raises(ValueError, match="observation space"):
        obs_spec_from_space(space)


def test_obs_to_tensor_checks_shapes_and_dtype():
    spec = ObsSpec(bev_shape=(2, 4, 4), state_dim=3)
    good = {"bev": np.zeros((2, 4, 4), np.uint8), "state": np.zeros(3, np.float32)}
    tensors, single = obs_to_tensor(good, spec)
    assert single and tensors["bev"].shape == (1, 2, 4, 4)
    with pytest.raises(ValueError, match="uint8"):
        obs_to_tensor({**good, "bev": good["bev"].astype(np.float32)}, spec)
    with pytest.raises(ValueError, match="state"):
        obs_to_tensor({**good, "state": np.zeros(4, np.float32)}, spec)
    with pytest.raises(ValueError, match="shape"):
        obs_to_tensor(np.zeros((2, 5)), ObsSpec(vector_dim=4))


def test_action_spaces():
    assert action_kind_for_space(gym.spaces.Discrete(2)) == (ActionKind.CATEGORICAL, 2)
    assert action_kind_for_space(gym.spaces.Box(-1, 1, (2,)), "gaussian") == (
        ActionKind.GAUSSIAN,
        2,
    )
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        action_kind_for_space(gym.spaces.Box(-2, 2, (1,)))


def test_beta_log_prob_accounts_for_the_interval_change():
    torch.manual_seed(0)
    agent = ActorCritic(make_encoder(ObsSpec(vector_dim=3)), ActionKind.BETA, 2, (8,), (8,))
    obs, actions = torch.randn(4, 3), torch.rand(4, 2) * 1.8 - 0.9
    _, log_prob, _, _ = agent.get_action_and_value(obs, actions)
    dist = agent.distribution(agent.encoder(obs))
    expected = dist.log_prob((actions + 1) / 2) - 2 * np.log(2.0)
    assert torch.allclose(log_prob, expected, atol=1e-5)


def test_random_shift_is_a_replicate_padded_crop():
    bev = torch.arange(2 * 1 * 6 * 6, dtype=torch.uint8).reshape(2, 1, 6, 6)
    shifted = random_shift(bev, pad_px=2, generator=torch.Generator().manual_seed(0))
    padded = torch.nn.functional.pad(bev.float(), (2, 2, 2, 2), mode="replicate")
    for i in range(2):
        crops = [padded[i, :, y : y + 6, x : x + 6] for y in range(5) for x in range(5)]
        assert any(torch.equal(shifted[i].float(), crop) for crop in crops)
    assert shifted.dtype == torch.uint8
    assert torch.equal(random_shift(bev, 0), bev)
