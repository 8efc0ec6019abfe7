"""DrivingPolicy and PolicySpec: rebuild from a spec, same actions as the learner, named errors."""

import numpy as np
import pytest
import torch

from found_rl.algos.ppo import PPO, PpoConfig
from found_rl.algos.sac import SAC, SacConfig
from found_rl.models.encoders import NetworkConfig
from found_rl.models.observation import ObsSpec
from found_rl.models.policy import PolicySpec, build_actor
from found_rl.storage.replay import ReplaySamples

SMALL = NetworkConfig(actor_hidden=(8,), critic_hidden=(8,))
VECTOR = ObsSpec(vector_dim=3)


def test_sac_policy_is_a_frozen_copy_that_acts_like_the_learner():
    torch.manual_seed(0)
    sac = SAC(VECTOR, 2, SacConfig(network=SMALL, policy_frequency=1))
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    policy = sac.policy()
    np.testing.assert_array_equal(policy.act(obs), sac.act(obs, deterministic=True))
    assert policy.act(obs[0]).shape == (2,)  # one observation in, one action out
    np.testing.assert_array_equal(policy.act(obs[0]), policy.act(obs)[0])
    before = policy.act(obs)
    batch = ReplaySamples(
        torch.as_tensor(obs), torch.zeros(5, 2), torch.ones(5), torch.as_tensor(obs), torch.zeros(5),
        torch.zeros(5), torch.zeros(5, 2), torch.zeros(5), torch.zeros(5),
    )
    sac.update(batch, global_step=1)
    assert not np.array_equal(sac.act(obs, deterministic=True), before)  # the learner moved ...
    np.testing.assert_array_equal(policy.act(obs), before)  # ... its exported policy did not


def test_spec_round_trip_rebuilds_an_actor_that_loads_the_weights():
    ppo = PPO(VECTOR, "beta", 2, PpoConfig(network=SMALL))
    spec = PolicySpec.from_dict(ppo.policy_spec.to_dict())
    assert spec == ppo.policy_spec
    actor = build_actor(spec)
    actor.load_state_dict(ppo.agent.state_dict())
    obs = torch.randn(4, 3)
    torch.testing.assert_close(actor.act(obs), ppo.agent.act(obs))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"algo": "td3"}, "algo"),
        ({"action_dim": 0}, "action_dim"),
        ({"action_kind": "beta"}, "action_kind"),
        ({"algo": "ppo", "action_kind": "dirichlet"}, "dirichlet"),
    ],
)
def test_bad_spec_names_the_field(kwargs, field):
    args = {"algo": "sac", "obs": VECTOR, "action_dim": 2, **kwargs}
    with pytest.raises(ValueError, match=field):
        PolicySpec(**args)
