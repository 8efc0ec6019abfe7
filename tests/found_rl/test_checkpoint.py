"""Checkpoints: save → load → same actions; clear errors for missing or corrupt files."""

import numpy as np
import pytest
import torch

from found_rl.algos.ppo import PPO, PpoConfig
from found_rl.algos.sac import SAC, SacConfig
from found_rl.checkpoint import load_policy, read_checkpoint, save_checkpoint
from found_rl.errors import UserError
from found_rl.models.encoders import EncoderConfig, NetworkConfig
from found_rl.models.observation import ObsSpec

TINY = NetworkConfig(
    encoder=EncoderConfig(
        conv_channels=(4, 4, 4, 4),
        bottleneck_channels=2,
        state_hidden=(8, 8),
        features_dim=16,
    ),
    actor_hidden=(16,),
    critic_hidden=(16,),
)
DRIVING = ObsSpec(bev_shape=(15, 32, 32), state_dim=10)


def driving_obs(batch: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "bev": rng.integers(0, 256, (batch, 15, 32, 32), dtype=np.uint8),
        "state": rng.normal(size=(batch, 10)).astype(np.float32),
    }


def test_sac_checkpoint_round_trip_gives_the_same_actions(tmp_path):
    torch.manual_seed(0)
    sac = SAC(DRIVING, 2, SacConfig(network=TINY))
    path = save_checkpoint(
        tmp_path / "run" / "policy.pt",
        sac.policy_spec,
        sac.actor.state_dict(),
        sac.state_dict(),
        {"global_step": 7},
    )
    policy = load_policy(path)
    obs = driving_obs(5)
    expected = sac.act(obs, deterministic=True)
    assert np.allclose(policy.act(obs), expected, atol=1e-6)
    single = policy.act({key: value[0] for key, value in obs.items()})
    assert single.shape == (2,) and np.allclose(single, expected[0], atol=1e-6)
    assert read_checkpoint(path)["metadata"] == {"global_step": 7}
    assert [p.name for p in path.parent.iterdir()] == ["policy.pt"]  # no temp files left behind


def test_ppo_checkpoint_round_trip_for_discrete_actions(tmp_path):
    ppo = PPO(
        ObsSpec(vector_dim=4),
        "categorical",
        2,
        PpoConfig(network=NetworkConfig(actor_hidden=(8,), critic_hidden=(8,))),
    )
    path = save_checkpoint(tmp_path / "ppo.pt", ppo.policy_spec, ppo.agent.state_dict())
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    assert np.array_equal(load_policy(path).act(obs), ppo.act(obs))


def test_missing_checkpoint_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.pt"):
        load_policy(tmp_path / "nope.pt")


@pytest.mark.parametrize("kept", [0, 100, -200])
def test_a_truncated_checkpoint_is_the_users_naming_the_path(tmp_path, kept):
    path = tmp_path / "broken.pt"
    sac = SAC(DRIVING, 2, SacConfig(network=TINY))
    save_checkpoint(path, sac.policy_spec, sac.actor.state_dict())
    path.write_bytes(path.read_bytes()[:kept])
    with pytest.raises(UserError, match=r"checkpoint .*broken\.pt: cannot be read as a torch file; it is truncated"):
        load_policy(path)


def test_corrupt_checkpoint_names_the_path(tmp_path):
    path = tmp_path / "broken.pt"
    path.write_bytes(b"these are not the bytes of a torch file")
    with pytest.raises(UserError, match=r"broken\.pt"):
        load_policy(path)
    other = tmp_path / "other.pt"
    torch.save({"weights": 1}, other)
    with pytest.raises(ValueError, match="not a found-rl checkpoint"):
        load_policy(other)


def test_policy_refuses_observations_of_the_wrong_layout(tmp_path):
    sac = SAC(DRIVING, 2, SacConfig(network=TINY))
    policy = load_policy(save_checkpoint(tmp_path / "p.pt", sac.policy_spec, sac.actor.state_dict()))
    with pytest.raises(ValueError, match="observation"):
        policy.act(np.zeros((2, 10), np.float32))


@pytest.mark.parametrize(
    "failure",
    [torch.OutOfMemoryError("CUDA out of memory"), RuntimeError("an internal bug"), MemoryError()],
)
def test_a_failure_of_loading_that_is_not_the_files_keeps_its_type(tmp_path, monkeypatch, failure):
    path = tmp_path / "ok.pt"
    sac = SAC(DRIVING, 2, SacConfig(network=TINY))
    save_checkpoint(path, sac.policy_spec, sac.actor.state_dict())

    def load(*args, **kwargs):
        raise failure

    monkeypatch.setattr(torch, "load", load)
    with pytest.raises(type(failure)) as raised:
        read_checkpoint(path)
    assert not isinstance(raised.value, UserError)


def test_weights_that_do_not_fit_the_spec_are_the_users(tmp_path):
    sac = SAC(DRIVING, 2, SacConfig(network=TINY))
    state = {key: value[..., :1] if value.ndim else value for key, value in sac.actor.state_dict().items()}
    path = save_checkpoint(tmp_path / "misfit.pt", sac.policy_spec, state)
    with pytest.raises(UserError, match=r"misfit\.pt: policy does not match its spec"):
        load_policy(path)
