"""Lock-step samplers in-process: masks, step ids, end rules, the transition stream, bad input."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from fast_sampler import (
    CarlaLikeEnv,
    ClipEndRule,
    EnvFactoryError,
    FastSampler,
    GlobalResetSampler,
    LockstepSampler,
    PerClipResetSampler,
    Rollout,
    SingleClipSampler,
    StepId,
)
from fast_sampler.rules import AdaptiveRho


def zero_policy(obs: np.ndarray) -> np.ndarray:
    return np.zeros((len(obs), 2), np.float32)


def value_policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    return np.tile(obs[:, :1], (1, 2)) * 0.5, {"values": obs[:, 0] * 2.0, "log_probs": -np.ones(len(obs))}


def env_fns(lengths: list[list[int]], **kwargs: object) -> list[functools.partial]:
    """One factory per clip; clip n's episodes last lengths[n][k % len] steps."""
    return [functools.partial(CarlaLikeEnv, episode_lengths=clip_lengths, **kwargs) for clip_lengths in lengths]


def as_grid(flags: np.ndarray) -> list[str]:
    """(T, N) flags as one string per clip, e.g. '110' (readable expected values)."""
    return ["".join(str(int(v)) for v in column) for column in flags.T]


def test_fast_pads_ended_clips_and_truncates_the_rest_at_rho(stepping) -> None:
    # Lengths 2, 3, 5, 8 and rho = 0.5: clip 0 ends at lock-step 1, clip 1 at lock-step 2, which
    # makes 2 of 4 ended, so clips 2 and 3 are truncated at lock-step 2 and everyone resets.
    with FastSampler(env_fns([[2], [3], [5], [8]]), zero_policy, rho=0.5, seed=0) as sampler:
        rollout = stepping.collect(sampler, 6)
    assert as_grid(rollout.valid) == ["110110", "111111", "111111", "111111"]
    assert as_grid(rollout.terminated) == ["010010", "001001", "000000", "000000"]
    assert as_grid(rollout.truncated) == ["000000", "000000", "001001", "001001"]
    assert as_grid(rollout.episode_index >= 1) == ["000110", "000111", "000111", "000111"]  # padding: -1
    assert sampler.stats.global_resets == 2
    assert sampler.stats.valid_transitions == rollout.num_valid == 22


@pytest.mark.parametrize(
    "rho, cut_at",
    [(0.3, 1), (1 / 3, 1), (0.34, 3), (0.5, 3), (0.67, None), (1.0, None)],
    ids=["0.3", "1/3", "0.34", "0.5", "0.67", "1.0"],
)
def test_global_truncation_fires_when_the_ended_fraction_first_reaches_rho(
    rho: float, cut_at: int | None, stepping
) -> None:
    # N = 3, lengths 2, 4, 6: clip 0 ends at lock-step 1 (1/3 ended), clip 1 at lock-step 3
    # (2/3), clip 2 at lock-step 5 (3/3). METHOD §4: the cut comes when ended / N >= rho, so
    # rho = 0.5 needs 2 ended clips (not floor(1.5) = 1) and rho = 0.34 needs 2 as well.
    with FastSampler(env_fns([[2], [4], [6]]), zero_policy, rho=rho, seed=0) as sampler:
        rollout = stepping.collect(sampler, 6)
    if cut_at == 1:  # clip 0 ending is enough: every 2-step round cuts clips 1 and 2
        assert rollout.valid.all()
        assert as_grid(rollout.terminated) == ["010101", "000000", "000000"]
        assert as_grid(rollout.truncated) == ["000000", "010101", "010101"]
    elif cut_at == 3:  # clip 0 is padding at lock-steps 2 and 3; clip 2 is cut at lock-step 3
        assert as_grid(rollout.valid[:4]) == ["1100", "1111", "1111"]
        assert as_grid(rollout.terminated[:4]) == ["0100", "0001", "0000"]
        assert as_grid(rollout.truncated[:4]) == ["0000", "0000", "0001"]
    else:  # nobody is cut: every clip runs to its own end, then all reset together
        assert as_grid(rollout.valid) == ["110000", "111100", "111111"]
        assert as_grid(rollout.terminated) == ["010000", "000100", "000001"]
        assert not rollout.truncated.any()
    assert sampler.stats.global_resets == (3 if cut_at == 1 else 1)


def test_an_episode_that_terminates_on_its_horizon_step_is_terminal_not_truncated(stepping) -> None:
    # Clip 0's episode terminates at its 3rd step, exactly when the horizon T_max = 3 is hit:
    # it really ended, so it must not be bootstrapped. Clip 1 is cut by the horizon.
    with FastSampler(env_fns([[3], [9]]), zero_policy, rho=0.5, horizon=3, seed=0) as sampler:
        rollout = stepping.collect(sampler, 3)
    assert as_grid(rollout.terminated) == ["001", "000"]
    assert as_grid(rollout.truncated) == ["000", "001"]


def test_padding_rows_hold_the_last_observation_with_zero_reward_action_and_ids(stepping) -> None:
    with FastSampler(env_fns([[2], [4]]), value_policy, rho=1.0, seed=3) as sampler:
        rollout = stepping.collect(sampler, 4)
    padding = ~rollout.valid
    assert as_grid(padding) == ["0011", "0000"]
    last_obs = rollout.next_obs[1, 0]
    for t in (2, 3):
        np.testing.assert_array_equal(rollout.obs[t, 0], last_obs)
        np.testing.assert_array_equal(rollout.next_obs[t, 0], last_obs)
    assert np.all(rollout.rewards[padding] == 0) and np.all(rollout.actions[padding] == 0)
    for ids in (rollout.clip_index, rollout.episode_index, rollout.step_index):
        assert np.all(ids[padding] == -1)
    assert not np.any(rollout.terminated[padding] | rollout.truncated[padding])
    assert rollout.extras["values"].shape == (4, 2)
    np.testing.assert_allclose(rollout.extras["values"], rollout.obs[..., 0] * 2.0)


@pytest.mark.parametrize(
    "make",
    [
        lambda fns: FastSampler(fns, value_policy, rho=0.5, seed=1),
        lambda fns: FastSampler(fns, value_policy, rho=0.75, horizon=7, seed=1),
        lambda fns: PerClipResetSampler(fns, value_policy, seed=1),
        lambda fns: GlobalResetSampler(fns, value_policy, seed=1),
    ],
    ids=["fast", "fast-horizon", "per-clip", "global"],
)
def test_step_ids_are_unique_consecutive_and_follow_the_observations(make, stepping) -> None:
    with make(env_fns([[3, 9], [4], [2, 6, 11], [5, 1]])) as sampler:
        rollout = stepping.collect(sampler, 40)
    horizon, num_clips = rollout.valid.shape
    seen: set[StepId] = set()
    for clip in range(num_clips):
        previous: tuple[int, int] | None = None  # (episode, step) of the clip's last valid row
        t_previous = -1
        for t in range(horizon):
            if not rollout.valid[t, clip]:
                continue
            id_arrays = (rollout.clip_index, rollout.episode_index, rollout.step_index)
            step_id = StepId(*(int(ids[t, clip]) for ids in id_arrays))
            assert step_id.clip == clip and step_id not in seen
            seen.add(step_id)
            if previous is not None and previous[0] == step_id.episode:
                # Same episode: the step counter advances by one and o_t is last row's o_{t+1}.
                assert step_id.step == previous[1] + 1
                np.testing.assert_array_equal(rollout.obs[t, clip], rollout.next_obs[t_previous, clip])
            else:
                assert step_id.step == 0 and step_id.episode == (previous[0] + 1 if previous else 0)
                assert previous is None or rollout.terminated[t_previous, clip] or rollout.truncated[t_previous, clip]
            previous, t_previous = (step_id.episode, step_id.step), t
    assert len(seen) == rollout.num_valid


def test_horizon_truncates_every_running_clip_without_terminating_it(stepping) -> None:
    with FastSampler(env_fns([[50], [60]]), zero_policy, rho=0.5, horizon=3, seed=0) as sampler:
        rollout = stepping.collect(sampler, 6)
    assert as_grid(rollout.truncated) == ["001001", "001001"]
    assert not rollout.terminated.any() and rollout.valid.all()


def test_per_clip_reset_never_pads_and_resets_only_the_ended_clip(stepping) -> None:
    with PerClipResetSampler(env_fns([[2], [3]]), zero_policy, seed=0) as sampler:
        rollout = stepping.collect(sampler, 6)
    assert rollout.valid.all()
    assert as_grid(rollout.terminated) == ["010101", "001001"]
    assert not rollout.truncated.any()
    assert rollout.episode_index[:, 0].tolist() == [0, 0, 1, 1, 2, 2]
    assert rollout.episode_index[:, 1].tolist() == [0, 0, 0, 1, 1, 1]


def test_global_reset_truncates_all_others_when_any_clip_ends(stepping) -> None:
    with GlobalResetSampler(env_fns([[2], [5], [7]]), zero_policy, seed=0) as sampler:
        rollout = stepping.collect(sampler, 4)
    assert rollout.valid.all()
    assert as_grid(rollout.terminated) == ["0101", "0000", "0000"]
    assert as_grid(rollout.truncated) == ["0000", "0101", "0101"]
    assert rollout.step_index[:, 2].tolist() == [0, 1, 0, 1]


def test_single_clip_resets_on_done(stepping) -> None:
    with SingleClipSampler(functools.partial(CarlaLikeEnv, episode_lengths=[2, 1]), zero_policy, seed=0) as sampler:
        rollout = stepping.collect(sampler, 5)
    assert rollout.valid.shape == (5, 1) and rollout.valid.all()
    assert as_grid(rollout.terminated) == ["01101"]  # lengths 2, 1, 2


def test_transition_stream_yields_exactly_the_valid_rows(stepping) -> None:
    lengths = [[2, 7], [3], [4, 1]]
    with FastSampler(env_fns(lengths), value_policy, rho=0.5, seed=5) as sampler:
        rollout = stepping.collect(sampler, 12)
    with FastSampler(env_fns(lengths), value_policy, rho=0.5, seed=5) as sampler:
        # Bounded calls that stop mid-lock-step must not lose the rest of that lock-step.
        transitions = list(sampler.transitions(2))
        while len(transitions) < rollout.num_valid:
            transitions += list(sampler.transitions(min(5, rollout.num_valid - len(transitions))))
    expected = [(t, n) for t in range(12) for n in range(3) if rollout.valid[t, n]]
    assert len(transitions) == len(expected)
    for transition, (t, n) in zip(transitions, expected, strict=True):
        assert transition.step_id == StepId(n, int(rollout.episode_index[t, n]), int(rollout.step_index[t, n]))
        np.testing.assert_array_equal(transition.obs, rollout.obs[t, n])
        np.testing.assert_array_equal(transition.next_obs, rollout.next_obs[t, n])
        np.testing.assert_array_equal(transition.action, rollout.actions[t, n])
        assert transition.reward == pytest.approx(rollout.rewards[t, n])
        assert (transition.terminated, transition.truncated) == (rollout.terminated[t, n], rollout.truncated[t, n])
        assert transition.info["t"] == rollout.step_index[t, n] + 1


def test_same_seed_gives_the_same_rollout_with_dict_observations(stepping) -> None:
    def run() -> Rollout:
        fns = [functools.partial(CarlaLikeEnv, dict_obs=True) for _ in range(3)]
        with FastSampler(fns, lambda obs: obs["state"][:, :2], rho=0.5, seed=11) as sampler:
            return stepping.collect(sampler, 30)

    first, second = run(), run()
    for key in ("state", "image"):
        np.testing.assert_array_equal(first.obs[key], second.obs[key])
        assert first.obs[key].shape[:2] == (30, 3)
    np.testing.assert_array_equal(first.rewards, second.rewards)
    np.testing.assert_array_equal(first.valid, second.valid)


def test_rollout_tensors_keep_shapes_and_masks(stepping) -> None:
    torch = pytest.importorskip("torch")
    with FastSampler(env_fns([[2], [3]], dict_obs=True), lambda o: np.zeros((2, 2)), rho=1.0, seed=0) as sampler:
        tensors = stepping.collect(sampler, 3).tensors()
    assert tensors["obs"]["image"].shape == (3, 2, 3, 8, 8) and tensors["obs"]["image"].dtype == torch.uint8
    assert tensors["valid"].dtype == torch.bool
    assert tensors["valid"].tolist() == [[True, True], [True, True], [False, True]]


@pytest.mark.parametrize("rho", [0.0, -0.5, 1.5, float("nan")])
def test_invalid_rho_is_rejected_by_name(rho: float) -> None:
    with pytest.raises(ValueError, match="rho"):
        FastSampler(env_fns([[2]]), zero_policy, rho=rho)


@pytest.mark.parametrize("horizon", [0, -3, 2.5, True])
def test_invalid_horizon_is_rejected_by_name(horizon: object) -> None:
    with pytest.raises(ValueError, match="horizon"):
        FastSampler(env_fns([[2]]), zero_policy, horizon=horizon)


def test_env_factory_that_raises_names_its_clip() -> None:
    fns = env_fns([[2], [2]]) + [functools.partial(CarlaLikeEnv, obs_dim=0)]
    with pytest.raises(EnvFactoryError, match=r"clip 2: .*obs_dim") as info:
        FastSampler(fns, zero_policy)
    assert info.value.clip == 2


def test_clips_with_different_observation_spaces_are_rejected() -> None:
    fns = [functools.partial(CarlaLikeEnv), functools.partial(CarlaLikeEnv, obs_dim=3)]
    with pytest.raises(ValueError, match="clip 1: observation_space"):
        FastSampler(fns, zero_policy)


def test_policy_returning_the_wrong_batch_size_is_rejected(stepping) -> None:
    policy = lambda obs: np.zeros((1, 2))  # noqa: E731
    with FastSampler(env_fns([[2], [2]]), policy, seed=0) as sampler, pytest.raises(ValueError, match=r"policy: .*N=2"):
        stepping.step(sampler)


@pytest.mark.parametrize(
    "seconds_per_valid, expected_best, never_tried",
    [
        ({0.25: 3.0, 0.5: 1.0, 0.75: 2.0, 1.0: 4.0}, 0.5, {1.0}),
        ({0.25: 5.0, 0.5: 3.0, 0.75: 2.0, 1.0: 1.0}, 1.0, set()),
        ({0.25: 1.0, 0.5: 2.0, 0.75: 3.0, 1.0: 4.0}, 0.25, {1.0}),
    ],
    ids=["peak-in-the-middle", "climbs-to-1", "descends-to-0.25"],
)
def test_adaptive_rho_climbs_to_the_fastest_threshold(
    seconds_per_valid: dict[float, float], expected_best: float, never_tried: set[float]
) -> None:
    adaptive = AdaptiveRho(4, np.random.default_rng(0), epsilon=0.0)
    assert adaptive.candidates.tolist() == [0.25, 0.5, 0.75, 1.0] and adaptive.choose() == 0.5
    tried = set()
    for _ in range(12):
        rho = adaptive.choose()
        tried.add(rho)
        adaptive.update(rho, 100, 100 * seconds_per_valid[rho])
    assert adaptive.best == expected_best and adaptive.choose() == expected_best
    assert not tried & never_tried


def test_fast_sampler_with_adaptive_rho_only_uses_candidate_thresholds(stepping) -> None:
    with FastSampler(env_fns([[2, 9], [3], [4, 2], [6]]), zero_policy, adaptive_rho=True, seed=0) as sampler:
        used = set()
        for _ in range(60):
            used.add(sampler.rho)
            stepping.step(sampler)
    assert used <= {0.25, 0.5, 0.75, 1.0} and len(used) > 1
    with pytest.raises(ValueError, match="adaptive_rho"):
        LockstepSampler(env_fns([[2]]), zero_policy, end_rule=ClipEndRule.RESET_CLIP, adaptive_rho=True)


def test_policy_may_return_torch_tensors(stepping) -> None:
    torch = pytest.importorskip("torch")

    def torch_policy(obs: np.ndarray) -> tuple[object, dict[str, object]]:
        state = torch.as_tensor(obs)
        return state[:, :2].tanh(), {"log_probs": -state[:, 0].abs()}

    with FastSampler(env_fns([[3], [4]]), torch_policy, seed=0) as sampler:
        rollout = stepping.collect(sampler, 3)
    assert isinstance(rollout.actions, np.ndarray) and rollout.actions.shape == (3, 2, 2)
    np.testing.assert_allclose(rollout.extras["log_probs"], -np.abs(rollout.obs[..., 0]), rtol=1e-6)
