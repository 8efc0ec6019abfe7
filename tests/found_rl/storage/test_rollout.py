"""Rollout storage: shape checks and driving observations."""

import pytest
import torch

from found_rl.models.observation import ObsSpec
from found_rl.storage.rollout import RolloutStorage


def test_driving_rollout_flattens_dict_observations():
    spec = ObsSpec(bev_shape=(3, 8, 8), state_dim=10)
    storage = RolloutStorage(2, 3, spec, (2,))
    for _ in range(2):
        obs = {
            "bev": torch.randint(0, 255, (3, 3, 8, 8), dtype=torch.uint8),
            "state": torch.randn(3, 10),
        }
        storage.add(
            obs,
            torch.zeros(3, 2),
            torch.zeros(3),
            torch.zeros(3),
            torch.ones(3),
            torch.zeros(3, dtype=torch.bool),
            torch.zeros(3, dtype=torch.bool),
            torch.ones(3),
        )
    out = storage.compute_returns(torch.zeros(3), gamma=0.99, gae_lambda=0.95)
    assert out.observations["bev"].shape == (6, 3, 8, 8) and out.observations["bev"].dtype == torch.uint8
    assert out.actions.shape == (6, 2) and out.valid.shape == (6,)


def test_full_storage_and_early_returns_are_refused():
    storage = RolloutStorage(1, 1, ObsSpec(vector_dim=1), (), discrete=True)
    with pytest.raises(ValueError, match="num_steps"):
        storage.compute_returns(torch.zeros(1), 0.99, 0.95)
    storage.add(
        torch.zeros(1, 1),
        torch.zeros(1, dtype=torch.int64),
        torch.zeros(1),
        torch.zeros(1),
        torch.zeros(1),
        torch.zeros(1, dtype=torch.bool),
        torch.zeros(1, dtype=torch.bool),
        torch.ones(1),
    )
    with pytest.raises(ValueError, match="reset"):
        storage.add(
            torch.zeros(1, 1),
            torch.zeros(1, dtype=torch.int64),
            torch.zeros(1),
            torch.zeros(1),
            torch.zeros(1),
            torch.zeros(1, dtype=torch.bool),
            torch.zeros(1, dtype=torch.bool),
            torch.ones(1),
        )


def add_terminal_step(storage: RolloutStorage, rewards: list[float]) -> None:
    """One lock-step in which every clip gets its reward and terminates (so return = reward)."""
    num_envs = len(rewards)
    storage.add(
        torch.zeros(num_envs, 1),
        torch.zeros(num_envs, dtype=torch.int64),
        torch.zeros(num_envs),
        torch.zeros(num_envs),
        torch.tensor(rewards),
        torch.ones(num_envs, dtype=torch.bool),
        torch.zeros(num_envs, dtype=torch.bool),
        torch.ones(num_envs),
    )


def test_clip_bonus_goes_to_its_entry_and_does_not_outlive_a_reset():
    storage = RolloutStorage(2, 2, ObsSpec(vector_dim=1), (), discrete=True)
    add_terminal_step(storage, [1.0, 2.0])
    add_terminal_step(storage, [3.0, 4.0])
    storage.attach_clip_bonus(1, 0, 0.5)  # a late bonus for lock-step 1, clip 0 only
    out = storage.compute_returns(torch.zeros(2), gamma=0.99, gae_lambda=0.95)
    assert out.returns.tolist() == pytest.approx([1.0, 2.0, 3.5, 4.0])
    storage.reset()
    add_terminal_step(storage, [1.0, 2.0])
    add_terminal_step(storage, [3.0, 4.0])
    # The next rollout reuses the buffers: the old bonus must be masked, not added again.
    out = storage.compute_returns(torch.zeros(2), gamma=0.99, gae_lambda=0.95)
    assert out.returns.tolist() == pytest.approx([1.0, 2.0, 3.0, 4.0])


def test_a_late_bonus_finds_its_entry_by_step_id_and_a_stale_one_is_dropped():
    storage = RolloutStorage(2, 2, ObsSpec(vector_dim=1), (), discrete=True)
    for t, rewards in enumerate(([1.0, 2.0], [3.0, 4.0])):
        storage.add(
            torch.zeros(2, 1), torch.zeros(2, dtype=torch.int64), torch.zeros(2), torch.zeros(2),
            torch.tensor(rewards), torch.ones(2, dtype=torch.bool), torch.zeros(2, dtype=torch.bool), torch.ones(2),
            step_ids=[(0, 7, t), (1, 3, t)],
        )
    assert storage.attach_labels((1, 3, 0), clip_bonus=0.5)  # clip 1's entry of lock-step 0
    assert not storage.attach_labels((1, 3, 5), clip_bonus=9.0)  # no such entry
    out = storage.compute_returns(torch.zeros(2), gamma=0.99, gae_lambda=0.95)
    assert out.returns.tolist() == pytest.approx([1.0, 2.5, 3.0, 4.0])
    storage.reset()
    assert not storage.attach_labels((0, 7, 1), clip_bonus=1.0)  # its rollout was consumed: dropped
