"""Replay storage: next observation by index, episode ends, labels by step id, memory footprint."""

import numpy as np
import pytest

from found_rl.models.observation import ObsSpec
from found_rl.storage.replay import ReplayBuffer

VECTOR = ObsSpec(vector_dim=2)


def vec(value: float) -> np.ndarray:
    """A 1-clip vector observation that encodes ``value`` (so next_obs can be checked)."""
    return np.array([[value, -value]], dtype=np.float32)


def fill_episode(buffer: ReplayBuffer, episode: int, length: int, ending: str) -> None:
    """Observations 100·episode + t; the last step terminates or truncates."""
    for t in range(length):
        is_last = t == length - 1
        buffer.add(
            vec(100 * episode + t),
            np.array([[t / 10]]),
            np.array([float(t)]),
            vec(100 * episode + t + 1),
            np.array([is_last and ending == "terminated"]),
            np.array([is_last and ending == "truncated"]),
            step_ids=[(0, episode, t)],
        )


def all_transitions(buffer: ReplayBuffer):
    batch = buffer.sample(512, np.random.default_rng(0))
    return {
        float(o[0]): (float(n[0]), float(d))
        for o, n, d in zip(batch.observations, batch.next_observations, batch.dones)
    }


def test_next_observation_follows_by_index_and_final_observation_is_kept():
    buffer = ReplayBuffer(64, VECTOR, action_dim=1)
    fill_episode(buffer, episode=0, length=3, ending="truncated")
    fill_episode(buffer, episode=1, length=2, ending="terminated")
    assert len(buffer) == 5
    transitions = all_transitions(buffer)
    assert transitions == {
        0.0: (1.0, 0.0),
        1.0: (2.0, 0.0),
        2.0: (3.0, 0.0),  # truncated: bootstraps from final obs 3
        100.0: (101.0, 0.0),
        101.0: (102.0, 1.0),  # terminated: done only here
    }


def test_each_observation_is_stored_once():
    buffer = ReplayBuffer(64, VECTOR, action_dim=1)
    fill_episode(buffer, episode=0, length=10, ending="truncated")
    # 10 transitions share 11 observations: 10 starts + one final observation, no duplicates
    assert len(buffer) == 10
    assert buffer.label_coverage() == {"advisor": 0.0, "clip": 0.0}


def test_labels_attach_by_step_id_and_are_sampled():
    buffer = ReplayBuffer(64, VECTOR, action_dim=1)
    fill_episode(buffer, episode=0, length=4, ending="truncated")
    assert buffer.attach_labels((0, 0, 2), action=np.array([0.5]), clip_bonus=0.2)
    assert buffer.attach_labels((0, 0, 3), clip_bonus=-0.1)
    assert not buffer.attach_labels((0, 7, 0), action=np.array([0.1]))  # unknown id
    assert buffer.label_coverage() == {"advisor": 0.25, "clip": 0.5}
    batch = buffer.sample(256, np.random.default_rng(1))
    for obs, has_advisor, advisor, has_clip, bonus in zip(
        batch.observations,
        batch.has_advisor,
        batch.advisor_actions,
        batch.has_clip,
        batch.clip_bonus,
    ):
        t = int(obs[0])
        assert bool(has_advisor) == (t == 2) and float(advisor[0]) == pytest.approx(0.5 if t == 2 else 0.0)
        assert bool(has_clip) == (t in (2, 3)) and float(bonus) == pytest.approx({2: 0.2, 3: -0.1}.get(t, 0.0))


def test_overwriting_a_slot_clears_its_labels_and_drops_late_answers():
    buffer = ReplayBuffer(8, VECTOR, action_dim=1)
    fill_episode(buffer, episode=0, length=3, ending="truncated")  # slots 0..3
    assert buffer.attach_labels((0, 0, 0), action=np.array([0.9]))
    fill_episode(buffer, episode=1, length=4, ending="truncated")  # slots 4..7, then wraps to 0
    fill_episode(buffer, episode=2, length=1, ending="truncated")
    assert not buffer.attach_labels((0, 0, 0), action=np.array([0.9]))  # its slot was overwritten
    assert not buffer.attach_labels((0, 0, 1), clip_bonus=0.1)
    assert buffer.label_coverage()["advisor"] == 0.0
    transitions = all_transitions(buffer)
    assert 0.0 not in transitions and 1.0 not in transitions
    assert all(next_obs == obs + 1 for obs, (next_obs, _) in transitions.items())


def test_memory_is_within_ten_percent_of_one_copy_of_the_observations():
    spec = ObsSpec(bev_shape=(15, 96, 96), state_dim=10)
    buffer = ReplayBuffer(200, spec, action_dim=2, num_envs=4)
    one_copy = 200 * (15 * 96 * 96 * 1 + 10 * 4)  # uint8 BEV + float32 state per stored observation
    assert buffer.obs_nbytes == one_copy
    assert buffer.nbytes <= 1.1 * one_copy


def test_lock_step_clips_with_padding_and_memmap(tmp_path):
    spec = ObsSpec(bev_shape=(2, 4, 4), state_dim=1)
    buffer = ReplayBuffer(32, spec, action_dim=2, num_envs=2, memmap_dir=tmp_path)
    assert (tmp_path / "replay_bev.npy").exists()

    def obs(values):
        return {
            "bev": np.stack([np.full((2, 4, 4), v, dtype=np.uint8) for v in values]),
            "state": np.array([[v] for v in values], dtype=np.float32),
        }

    buffer.add(
        obs([1, 11]),
        np.zeros((2, 2)),
        np.zeros(2),
        obs([2, 12]),
        np.array([False, True]),
        np.array([False, False]),
        step_ids=[(0, 0, 0), (1, 0, 0)],
    )
    # clip 1 ended: its next row is FAST padding and must not be stored
    buffer.add(
        obs([2, 12]),
        np.zeros((2, 2)),
        np.zeros(2),
        obs([3, 12]),
        np.array([False, False]),
        np.array([True, False]),
        step_ids=[(0, 0, 1), (1, 0, 1)],
        valid=np.array([True, False]),
    )
    assert len(buffer) == 3
    batch = buffer.sample(64, np.random.default_rng(0))
    pairs = {
        (int(o), int(n), int(d))
        for o, n, d in zip(
            batch.observations["state"][:, 0],
            batch.next_observations["state"][:, 0],
            batch.dones,
        )
    }
    assert pairs == {(1, 2, 0), (2, 3, 0), (11, 12, 1)}
    assert np.all(batch.observations["bev"].numpy()[:, 0, 0, 0] == batch.observations["state"].numpy()[:, 0])


def test_reset_without_an_episode_end_is_refused():
    buffer = ReplayBuffer(16, VECTOR, action_dim=1)
    buffer.add(
        vec(0),
        np.zeros((1, 1)),
        np.zeros(1),
        vec(1),
        np.array([False]),
        np.array([False]),
    )
    with pytest.raises(ValueError, match="terminated or truncated"):
        buffer.add(
            vec(50),
            np.zeros((1, 1)),
            np.zeros(1),
            vec(51),
            np.array([False]),
            np.array([False]),
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": 3}, "capacity"),
        ({"num_envs": 0}, "num_envs"),
        ({"action_dim": 0}, "action_dim"),
    ],
)
def test_bad_construction_names_the_parameter(kwargs, message):
    args = {"capacity": 16, "obs_spec": VECTOR, "action_dim": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        ReplayBuffer(**args)


def test_bad_shapes_and_labels_are_named():
    buffer = ReplayBuffer(16, VECTOR, action_dim=1)
    with pytest.raises(ValueError, match="next_obs"):
        buffer.add(
            vec(0),
            np.zeros((1, 1)),
            np.zeros(1),
            np.zeros((1, 5)),
            np.array([False]),
            np.array([False]),
        )
    with pytest.raises(ValueError, match="no transitions"):
        buffer.sample(4, np.random.default_rng(0))
    fill_episode(buffer, 0, 2, "terminated")
    with pytest.raises(ValueError, match="action"):
        buffer.attach_labels((0, 0, 0), action=np.array([np.nan]))


def two_clip_obs(first: float, second: float) -> np.ndarray:
    return np.array([[first, -first], [second, -second]], dtype=np.float32)


def test_a_late_label_attaches_to_the_clip_named_by_its_step_id():
    # Two lock-stepped clips share (episode, step) ids; only the clip slot tells them apart.
    buffer = ReplayBuffer(32, VECTOR, action_dim=1, num_envs=2)
    for t in range(3):
        buffer.add(
            two_clip_obs(t, 100 + t),
            np.zeros((2, 1)),
            np.zeros(2),
            two_clip_obs(t + 1, 101 + t),
            np.array([False, False]),
            np.array([t == 2, t == 2]),
            step_ids=[(0, 0, t), (1, 0, t)],
        )
    assert buffer.attach_labels((1, 0, 1), action=np.array([0.7]), clip_bonus=0.3)
    batch = buffer.sample(256, np.random.default_rng(0))
    labelled = {float(o[0]) for o, h in zip(batch.observations, batch.has_advisor) if h}
    assert labelled == {101.0}
    labels = zip(batch.observations, batch.has_clip, batch.clip_bonus, batch.advisor_actions)
    for obs, has_clip, bonus, advisor in labels:
        is_target = float(obs[0]) == 101.0
        assert bool(has_clip) == is_target
        assert float(bonus) == pytest.approx(0.3 if is_target else 0.0)
        assert float(advisor[0]) == pytest.approx(0.7 if is_target else 0.0)


def sample_after_overwriting_labelled_slots() -> tuple[ReplayBuffer, object]:
    buffer = ReplayBuffer(8, VECTOR, action_dim=1)
    fill_episode(buffer, episode=0, length=3, ending="truncated")  # slots 0..3
    for t in range(3):
        assert buffer.attach_labels((0, 0, t), action=np.array([0.9]), clip_bonus=0.4)
    fill_episode(buffer, episode=1, length=4, ending="truncated")  # slots 4..7, then wraps to 0
    fill_episode(buffer, episode=2, length=2, ending="terminated")  # reuses slots 0..2
    batch = buffer.sample(256, np.random.default_rng(0))
    assert {float(o[0]) for o in batch.observations} == {100.0, 101.0, 102.0, 103.0, 200.0, 201.0}
    return buffer, batch


def test_a_transition_written_over_a_labelled_slot_starts_unlabelled():
    buffer, batch = sample_after_overwriting_labelled_slots()
    assert not batch.has_advisor.any() and not batch.has_clip.any()
    assert buffer.label_coverage() == {"advisor": 0.0, "clip": 0.0}


def test_unlabelled_samples_in_overwritten_slots_hold_zero_labels():
    _, batch = sample_after_overwriting_labelled_slots()
    assert not batch.advisor_actions.any() and not batch.clip_bonus.any()


def test_a_dead_workers_lost_step_ends_the_clips_chain():
    # What FastSampler.step() hands over when clip 0's worker dies: lock-step 0 is a normal,
    # unflagged transition (the death is not known yet); lock-step 1 is invalid for clip 0
    # (worker_died, the step is lost); lock-step 2 starts a new episode from a reset
    # observation. StepBatches cannot flag lock-step 0 after the fact (only Rollout.from_steps
    # does), so the buffer must treat a skipped invalid row as the end of the clip's chain.
    buffer = ReplayBuffer(16, VECTOR, action_dim=1)
    no = np.array([False])
    buffer.add(vec(0), np.zeros((1, 1)), np.zeros(1), vec(1), no, no, step_ids=[(0, 0, 0)])
    buffer.add(vec(1), np.zeros((1, 1)), np.zeros(1), vec(1), no, no, step_ids=[(-1, -1, -1)], valid=np.array([False]))
    buffer.add(vec(50), np.zeros((1, 1)), np.zeros(1), vec(51), no, no, step_ids=[(0, 1, 0)])
    # Transition 0 → 1 keeps bootstrapping from o_1 (cut, not terminal); the new episode is stored.
    assert all_transitions(buffer) == {0.0: (1.0, 0.0), 50.0: (51.0, 0.0)}


def n_step_view(buffer: ReplayBuffer, n_step: int, gamma: float):
    """{o_t: (n-step reward, o_{t+k}, done, discount, has_clip, clip bonus sum)} over every stored transition."""
    batch = buffer.sample(2048, np.random.default_rng(1), n_step=n_step, gamma=gamma)
    return {
        float(o[0]): (float(r), float(n[0]), float(d), float(g), float(hc), float(b))
        for o, r, n, d, g, hc, b in zip(
            batch.observations,
            batch.rewards,
            batch.next_observations,
            batch.dones,
            batch.discounts,
            batch.has_clip,
            batch.clip_bonus,
        )
    }


def test_n_step_returns_stop_at_termination_and_truncation():
    buffer = ReplayBuffer(64, VECTOR, 1)
    fill_episode(buffer, 0, 4, "terminated")  # rewards 0, 1, 2, 3; terminates after o = 3
    fill_episode(buffer, 1, 3, "truncated")  # rewards 0, 1, 2; truncated after o = 102
    g = 0.5
    view = n_step_view(buffer, n_step=3, gamma=g)
    # o=0: r0 + g r1 + g² r2 = 0 + 0.5 + 0.5, bootstrap from o=3 with g³.
    assert view[0.0][:4] == pytest.approx((1.0, 3.0, 0.0, g**3))
    # o=1: 1 + 0.5·2 + 0.25·3 = 2.75, and the episode terminated inside the window.
    assert view[1.0][:4] == pytest.approx((2.75, 4.0, 1.0, g**3))
    # o=2: 2 + 0.5·3, terminated after two steps.
    assert view[2.0][:4] == pytest.approx((3.5, 4.0, 1.0, g**2))
    assert view[3.0][:4] == pytest.approx((3.0, 4.0, 1.0, g))
    # truncation: the window ends at the final observation, bootstrapped (not done).
    assert view[101.0][:4] == pytest.approx((1.0 + g * 2.0, 103.0, 0.0, g**2))
    assert view[102.0][:4] == pytest.approx((2.0, 103.0, 0.0, g))
    # a 1-step sample keeps the old contract: no discounts.
    assert buffer.sample(4, np.random.default_rng(0)).discounts is None


def test_n_step_window_stops_at_the_newest_transition_and_sums_clip_bonuses():
    buffer = ReplayBuffer(64, VECTOR, 1)
    fill_episode(buffer, 0, 3, "running")  # no end yet: o = 3 is pending
    assert buffer.attach_labels((0, 0, 1), clip_bonus=0.4)
    assert buffer.attach_labels((0, 0, 0), action=np.array([0.3]))
    view = n_step_view(buffer, n_step=5, gamma=0.5)
    assert view[0.0] == pytest.approx((0.0 + 0.5 * 1.0 + 0.25 * 2.0, 3.0, 0.0, 0.125, 1.0, 0.5 * 0.4))
    assert view[2.0] == pytest.approx((2.0, 3.0, 0.0, 0.5, 0.0, 0.0))
    batch = buffer.sample(64, np.random.default_rng(0), n_step=5, gamma=0.5)
    first = batch.observations[:, 0] == 0.0
    assert batch.has_advisor[first].tolist() == [1.0] * int(first.sum())  # labels are o_t's own


def test_n_step_window_never_crosses_into_the_next_episode_after_the_ring_wraps():
    buffer = ReplayBuffer(12, VECTOR, 1)
    for episode in range(6):
        fill_episode(buffer, episode, 3, "truncated")
    view = n_step_view(buffer, n_step=3, gamma=1.0)
    for obs, (_, next_obs, _, _, _, _) in view.items():
        assert int(next_obs) // 100 == int(obs) // 100  # same episode
        assert next_obs <= (int(obs) // 100) * 100 + 3


def test_n_step_sampling_refuses_a_missing_gamma():
    buffer = ReplayBuffer(16, VECTOR, 1)
    fill_episode(buffer, 0, 3, "terminated")
    with pytest.raises(ValueError, match="gamma"):
        buffer.sample(4, np.random.default_rng(0), n_step=3)
    with pytest.raises(ValueError, match="n_step"):
        buffer.sample(4, np.random.default_rng(0), n_step=0)


@pytest.mark.parametrize("kept", [0, 40, -40])
def test_a_truncated_replay_file_is_named_as_the_users(tmp_path, kept):
    from found_rl.errors import UserError

    buffer = ReplayBuffer(16, VECTOR, action_dim=1)
    fill_episode(buffer, episode=0, length=3, ending="truncated")
    path = tmp_path / "replay.npz"
    buffer.save(path)
    path.write_bytes(path.read_bytes()[:kept])
    with pytest.raises(UserError, match=r"replay buffer .*replay\.npz: cannot be read"):
        ReplayBuffer(16, VECTOR, action_dim=1).load(path)
