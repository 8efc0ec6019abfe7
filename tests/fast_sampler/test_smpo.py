"""SMPO helpers: hand-computed GAE, a second GAE implementation, and padded-vs-unpadded PPO losses."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from fast_sampler.smpo import masked_gae, masked_mean, masked_normalize


@pytest.fixture(autouse=True)
def float64_by_default():
    """Compare in float64 so 1e-6 checks measure the method, not float32 rounding."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def test_masked_mean_ignores_nan_padding_and_counts_valid_entries() -> None:
    values = torch.tensor([[1.0, float("nan")], [3.0, 5.0]])
    valid = torch.tensor([[1, 0], [1, 1]], dtype=torch.float64)
    assert masked_mean(values, valid).item() == pytest.approx(3.0)
    assert masked_mean(values, valid.bool()).item() == pytest.approx(3.0)


def test_masked_mean_of_nothing_valid_is_zero() -> None:
    values = torch.ones(3, 2, requires_grad=True)
    loss = masked_mean(values, torch.zeros(3, 2))
    loss.backward()
    assert loss.item() == 0.0
    assert torch.count_nonzero(values.grad) == 0


def test_masked_mean_broadcasts_a_transition_mask_over_trailing_dimensions() -> None:
    values = torch.arange(12.0).reshape(2, 3, 2)
    valid = torch.tensor([[True, False, True], [False, False, True]])
    assert masked_mean(values, valid).item() == pytest.approx(values[valid].mean().item())


def test_masked_mean_rejects_a_mask_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match="valid"):
        masked_mean(torch.zeros(4, 3), torch.ones(4, 2))


def test_masked_normalize_matches_plain_normalisation_of_valid_entries() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(7, 5, generator=generator)
    valid = torch.rand(7, 5, generator=generator) > 0.4
    normalized = masked_normalize(x, valid)
    expected = (x[valid] - x[valid].mean()) / (x[valid].std() + 1e-8)
    torch.testing.assert_close(normalized[valid], expected)
    assert torch.all(normalized[~valid] == 0)


@pytest.mark.parametrize(
    "valid",
    [[[0, 0], [1, 0]], [[0, 0], [0, 0]]],
    ids=["single-valid-step", "all-padding"],
)
def test_masked_normalize_of_one_or_no_valid_entry_is_finite_zero(valid: list[list[int]]) -> None:
    # One valid advantage has no spread: centred it is 0, and the Bessel divisor n − 1 = 0 is
    # guarded to 1 so the result is 0 / (0 + eps) = 0, not 0 / 0. Padding holds NaN and stays 0.
    x = torch.tensor([[float("nan"), 7.0], [3.0, float("nan")]])
    mask = torch.tensor(valid, dtype=torch.float64)
    assert torch.equal(masked_normalize(x, mask), torch.zeros(2, 2))


def test_masked_normalize_hand_computed_values() -> None:
    # Valid 1, 2, 6: mean 3, Bessel std sqrt((4 + 1 + 9) / 2) = sqrt(7); padding 100 is ignored.
    x = torch.tensor([1.0, 100.0, 2.0, 6.0])
    valid = torch.tensor([1.0, 0.0, 1.0, 1.0])
    root7 = 7.0**0.5
    expected = torch.tensor([-2.0 / root7, 0.0, -1.0 / root7, 3.0 / root7])
    torch.testing.assert_close(masked_normalize(x, valid, eps=0.0), expected)


@pytest.mark.parametrize("gamma, gae_lambda", [(0.99, 0.95), (0.9, 1.0), (0.5, 0.0)])
def test_gae_reward_only_on_last_step_with_constant_value(gamma: float, gae_lambda: float) -> None:
    # SB3 test_gae style: an episode of `length` steps pays 1 on its last (terminal) step and the
    # critic says `value` everywhere, so δ_t = γ·value − value before the end and 1 − value at it.
    length, value = 5, 0.3
    rewards = torch.zeros(length, 1)
    rewards[-1] = 1.0
    values = torch.full((length, 1), value)
    terminated = torch.zeros(length, 1)
    terminated[-1] = 1.0
    advantages, returns = masked_gae(
        rewards, values, values.clone(), terminated, torch.zeros(length, 1), torch.ones(length, 1), gamma, gae_lambda
    )
    expected = []
    for t in range(length):
        total = 0.0
        for k in range(t, length):
            delta = (1.0 - value) if k == length - 1 else (gamma * value - value)
            total += (gamma * gae_lambda) ** (k - t) * delta
        expected.append(total)
    torch.testing.assert_close(advantages[:, 0], torch.tensor(expected))
    torch.testing.assert_close(returns, advantages + values)
    if gae_lambda == 1.0:
        # λ = 1 gives Monte-Carlo returns: γ^(T−1−t).
        torch.testing.assert_close(returns[:, 0], gamma ** torch.arange(length - 1, -1, -1.0))


def test_gae_bootstraps_at_truncation_and_stops_at_termination() -> None:
    gamma, gae_lambda = 0.9, 0.8
    rewards = torch.tensor([[1.0], [2.0]])
    values = torch.tensor([[0.5], [0.25]])
    next_values = torch.tensor([[0.25], [4.0]])
    valid = torch.ones(2, 1)
    truncated = torch.tensor([[0.0], [1.0]])
    advantages, _ = masked_gae(rewards, values, next_values, torch.zeros(2, 1), truncated, valid, gamma, gae_lambda)
    last = 2.0 + gamma * 4.0 - 0.25
    first = 1.0 + gamma * 0.25 - 0.5 + gamma * gae_lambda * last
    torch.testing.assert_close(advantages[:, 0], torch.tensor([first, last]))
    advantages, _ = masked_gae(rewards, values, next_values, truncated, torch.zeros(2, 1), valid, gamma, gae_lambda)
    torch.testing.assert_close(advantages[1, 0], torch.tensor(2.0 - 0.25))


def gae_by_episode_loop(
    episodes: list[dict[str, np.ndarray]], gamma: float, gae_lambda: float
) -> list[np.ndarray]:
    """A second GAE: per episode, plain python, no masks (CleanRL's recursion on one trajectory)."""
    result = []
    for episode in episodes:
        length = len(episode["rewards"])
        advantages = np.zeros(length)
        running = 0.0
        for t in reversed(range(length)):
            bootstrap = 0.0 if episode["terminated"][t] else episode["next_values"][t]
            delta = episode["rewards"][t] + gamma * bootstrap - episode["values"][t]
            running = delta + (gamma * gae_lambda * running if t < length - 1 else 0.0)
            advantages[t] = running
        result.append(advantages)
    return result


def random_padded_rollout(seed: int, horizon: int = 12, num_clips: int = 5) -> dict[str, torch.Tensor]:
    """A FAST-shaped rollout: per clip, episodes that end (terminated, truncated or unflagged),
    then padding until a global reset; padding rows hold NaN so any leak shows up."""
    rng = np.random.default_rng(seed)
    shape = (horizon, num_clips)
    rollout = {
        "rewards": rng.normal(size=shape),
        "values": rng.normal(size=shape),
        "next_values": rng.normal(size=shape),
        "terminated": np.zeros(shape),
        "truncated": np.zeros(shape),
        "valid": np.zeros(shape),
    }
    for clip in range(num_clips):
        t = 0
        while t < horizon:
            length = int(rng.integers(1, 6))
            end = min(t + length, horizon) - 1
            rollout["valid"][t : end + 1, clip] = 1.0
            flag = rng.choice(["terminated", "truncated", "none"], p=[0.4, 0.4, 0.2])
            if flag != "none":
                rollout[flag][end, clip] = 1.0
            # An episode cut without a flag (e.g. the rollout buffer ended) must still stop the
            # chain at the padding that follows it.
            padding = int(rng.integers(1 if flag == "none" else 0, 4))
            t = end + 1 + padding
    for key in ("rewards", "values", "next_values"):
        rollout[key][rollout["valid"] == 0] = np.nan
    return {key: torch.as_tensor(value) for key, value in rollout.items()}


def split_into_episodes(
    rollout: dict[str, torch.Tensor],
) -> tuple[list[dict[str, np.ndarray]], list[list[tuple[int, int]]]]:
    """Cut a padded rollout into its episodes: their values and their (t, n) cells."""
    episodes, positions = [], []
    horizon, num_clips = rollout["valid"].shape
    for clip in range(num_clips):
        current: list[tuple[int, int]] = []
        for t in range(horizon):
            if rollout["valid"][t, clip]:
                current.append((t, clip))
                done = rollout["terminated"][t, clip] or rollout["truncated"][t, clip]
                if done or t == horizon - 1 or not rollout["valid"][t + 1, clip]:
                    positions.append(current)
                    current = []
    for cells in positions:
        episodes.append({key: np.array([rollout[key][cell].item() for cell in cells]) for key in rollout})
    return episodes, positions


@pytest.mark.parametrize("seed", range(8))
def test_masked_gae_agrees_with_a_per_episode_loop_on_random_masks(seed: int) -> None:
    rollout = random_padded_rollout(seed)
    gamma, gae_lambda = 0.97, 0.9
    advantages, returns = masked_gae(
        rollout["rewards"], rollout["values"], rollout["next_values"],
        rollout["terminated"], rollout["truncated"], rollout["valid"], gamma, gae_lambda,
    )
    assert torch.isfinite(advantages).all() and torch.isfinite(returns).all()
    episodes, positions = split_into_episodes(rollout)
    for expected, cells in zip(gae_by_episode_loop(episodes, gamma, gae_lambda), positions, strict=True):
        got = np.array([advantages[cell].item() for cell in cells])
        np.testing.assert_allclose(got, expected, atol=1e-12)
    padding = rollout["valid"] == 0
    assert torch.all(advantages[padding] == 0) and torch.all(returns[padding] == 0)


def test_masked_gae_rejects_mismatched_shapes_and_bad_discount() -> None:
    ones = torch.ones(3, 2)
    with pytest.raises(ValueError, match="next_values"):
        masked_gae(ones, ones, torch.ones(3, 3), ones, ones, ones, 0.9, 0.9)
    with pytest.raises(ValueError, match="gamma"):
        masked_gae(ones, ones, ones, ones, ones, ones, 1.5, 0.9)


class TinyActorCritic(torch.nn.Module):
    def __init__(self, obs_dim: int, num_actions: int) -> None:
        super().__init__()
        self.actor = torch.nn.Linear(obs_dim, num_actions)
        self.critic = torch.nn.Linear(obs_dim, 1)


def ppo_loss(
    model: TinyActorCritic,
    obs: torch.Tensor,
    actions: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    mean: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """CleanRL's PPO loss (clipped surrogate + value + entropy) with a pluggable mean."""
    clip_coef, vf_coef, ent_coef = 0.2, 0.5, 0.01
    distribution = torch.distributions.Categorical(logits=model.actor(obs))
    log_ratio = distribution.log_prob(actions) - old_log_probs
    ratio = log_ratio.exp()
    pg_loss = mean(torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip_coef, 1 + clip_coef)))
    v_loss = 0.5 * mean((model.critic(obs).squeeze(-1) - returns) ** 2)
    entropy_loss = mean(distribution.entropy())
    return pg_loss - ent_coef * entropy_loss + vf_coef * v_loss


@pytest.mark.parametrize("seed", range(4))
def test_ppo_loss_and_gradients_on_padded_batch_equal_unpadded(seed: int) -> None:
    gamma, gae_lambda, obs_dim, num_actions = 0.99, 0.95, 4, 3
    rollout = random_padded_rollout(seed, horizon=16, num_clips=6)
    valid = rollout["valid"].bool()
    generator = torch.Generator().manual_seed(seed)
    horizon, num_clips = valid.shape
    obs = torch.randn(horizon, num_clips, obs_dim, generator=generator)
    obs[~valid] = 1e6  # padding holds a held observation; any leak would dominate the loss
    actions = torch.randint(0, num_actions, (horizon, num_clips), generator=generator)
    old_log_probs = -torch.rand(horizon, num_clips, generator=generator) - 0.5
    torch.manual_seed(seed)
    model = TinyActorCritic(obs_dim, num_actions)

    # Padded path: masked GAE -> masked normalisation -> masked means over (T, N).
    advantages, returns = masked_gae(
        rollout["rewards"], rollout["values"], rollout["next_values"],
        rollout["terminated"], rollout["truncated"], rollout["valid"], gamma, gae_lambda,
    )
    padded_loss = ppo_loss(
        model, obs, actions, old_log_probs, masked_normalize(advantages, valid), returns,
        lambda v: masked_mean(v, valid),
    )
    padded_grads = torch.autograd.grad(padded_loss, list(model.parameters()))

    # Unpadded path: per-episode GAE loop on the valid transitions only, plain means.
    episodes, positions = split_into_episodes(rollout)
    cells = [cell for episode_cells in positions for cell in episode_cells]
    flat_advantages = torch.as_tensor(np.concatenate(gae_by_episode_loop(episodes, gamma, gae_lambda)))
    flat_values = torch.stack([rollout["values"][cell] for cell in cells])
    index_t = torch.tensor([t for t, _ in cells])
    index_n = torch.tensor([n for _, n in cells])
    plain_loss = ppo_loss(
        model, obs[index_t, index_n], actions[index_t, index_n], old_log_probs[index_t, index_n],
        (flat_advantages - flat_advantages.mean()) / (flat_advantages.std() + 1e-8),
        flat_advantages + flat_values, torch.mean,
    )
    plain_grads = torch.autograd.grad(plain_loss, list(model.parameters()))

    torch.testing.assert_close(padded_loss, plain_loss, atol=1e-6, rtol=0)
    for padded, plain in zip(padded_grads, plain_grads, strict=True):
        torch.testing.assert_close(padded, plain, atol=1e-6, rtol=0)
        assert torch.isfinite(padded).all()


def test_masked_gae_on_a_sampled_fast_rollout_matches_per_episode_gae() -> None:
    import functools

    from fast_sampler import CarlaLikeEnv, FastSampler

    fns = [functools.partial(CarlaLikeEnv, median_episode_steps=5.0, min_episode_steps=1) for _ in range(5)]
    policy = lambda obs: (np.tanh(obs[:, :2]), {"values": obs[:, 1]})  # noqa: E731
    with FastSampler(fns, policy, rho=0.6, horizon=9, seed=4) as sampler:
        sampled = sampler.collect(30)
    assert not sampled.valid.all() and sampled.truncated.any() and sampled.terminated.any()
    rollout = {
        "rewards": torch.as_tensor(sampled.rewards, dtype=torch.float64),
        "values": torch.as_tensor(sampled.extras["values"], dtype=torch.float64),
        "next_values": torch.as_tensor(sampled.next_obs[..., 1], dtype=torch.float64),
        "terminated": torch.as_tensor(sampled.terminated),
        "truncated": torch.as_tensor(sampled.truncated),
        "valid": torch.as_tensor(sampled.valid),
    }
    advantages, _ = masked_gae(**rollout, gamma=0.95, gae_lambda=0.9)
    episodes, positions = split_into_episodes(rollout)
    assert len(positions) > 10
    for expected, cells in zip(gae_by_episode_loop(episodes, 0.95, 0.9), positions, strict=True):
        np.testing.assert_allclose([advantages[cell].item() for cell in cells], expected, atol=1e-9)
