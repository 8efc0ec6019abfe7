import numpy as np
import pytest

from found_rl.clip.data import load_frames, split_by_episode, stack_rows_for
from found_rl.dataset import ShardWriter
from tests.found_rl.clip.conftest import ACTIONS, write_dataset
from vlm_server.anchors import action_index, anchor_captions


def test_frames_carry_the_caption_group_and_action_and_are_resized(tmp_path):
    chosen = write_dataset(tmp_path / "data", episodes=3, frames_per_episode=10, side=32, per_shard=7)
    frames = load_frames(tmp_path / "data", 16, show_progress=False, use_cache=False)
    assert frames.images.shape == (30, 16, 16, 3) and frames.input_size == 32
    assert frames.episodes.tolist() == [e for e in range(3) for _ in range(10)]
    expected_actions = [action_index(*ACTIONS[i]) for i in chosen]
    assert frames.action_ids.tolist() == expected_actions
    # command 4 (follow the lane) is row 3; 3 m/s is speed bin 2
    assert set(frames.command_rows.tolist()) == {3} and set(frames.groups.tolist()) == {3 * 4 + 2}
    assert all(anchor_captions()[c].startswith("Command is to follow the current lane") for c in frames.caption_ids)


def test_cached_frames_equal_decoded_frames(tmp_path):
    write_dataset(tmp_path / "data", episodes=2, frames_per_episode=5)
    first = load_frames(tmp_path / "data", 16, show_progress=False)
    again = load_frames(tmp_path / "data", 16, show_progress=False)
    np.testing.assert_array_equal(first.images, again.images)
    np.testing.assert_array_equal(first.caption_ids, again.caption_ids)


def test_a_caption_off_the_template_names_shard_and_key(tmp_path):
    with ShardWriter(tmp_path / "data", samples_per_shard=10) as writer:
        writer.write(
            np.zeros((8, 8, 3), np.uint8), np.zeros((1, 8, 8), np.uint8), {"meta": {"episode": 0}},
            "Command is to fly. The car is flying.", {},
        )
    with pytest.raises(ValueError, match=r"shard-000000.tar: sample 000000000: caption 'Command is to fly"):
        load_frames(tmp_path / "data", 8, show_progress=False, use_cache=False)


def test_a_corrupt_shard_is_named(tmp_path):
    write_dataset(tmp_path / "data", episodes=2, frames_per_episode=5, per_shard=5)
    shard = tmp_path / "data" / "shard-000001.tar"
    shard.write_bytes(shard.read_bytes()[:700])
    with pytest.raises(ValueError, match=r"shard-000001\.tar: corrupt or truncated"):
        load_frames(tmp_path / "data", 16, show_progress=False, use_cache=False)


def test_an_empty_dataset_is_refused(tmp_path):
    ShardWriter(tmp_path / "data").close()
    with pytest.raises(ValueError, match="has no samples"):
        load_frames(tmp_path / "data", 16, show_progress=False)


def test_a_missing_shard_is_named(tmp_path):
    write_dataset(tmp_path / "data", episodes=2, frames_per_episode=5, per_shard=5)
    (tmp_path / "data" / "shard-000000.tar").unlink()
    with pytest.raises(FileNotFoundError, match=r"shard-000000\.tar is listed"):
        load_frames(tmp_path / "data", 16, show_progress=False, use_cache=False)


def test_split_holds_out_whole_episodes():
    episodes = np.repeat(np.arange(20), 7)
    split = split_by_episode(episodes, 0.2, seed=3, source="d")
    assert len(split.held_out) == 4
    held = split.held_out_mask(episodes)
    assert set(episodes[held]).isdisjoint(set(episodes[~held]))
    assert split == split_by_episode(episodes, 0.2, seed=3, source="d")


def test_one_episode_is_too_few_for_a_held_out_split():
    with pytest.raises(ValueError, match="--data d: 1 episode"):
        split_by_episode(np.zeros(50, np.int64), 0.1, seed=0, source="d")


def test_history_stacks_take_the_newest_frame_at_least_that_old_within_the_episode():
    # episode 5 has steps 0..19 but for 8, episode 2 is interleaved with it
    steps = [s for s in range(20) if s != 8]
    episodes = np.array([5] * len(steps) + [2] * 4)
    steps = np.array(steps + [0, 1, 2, 3])
    order = np.random.default_rng(0).permutation(len(steps))
    episodes, steps = episodes[order], steps[order]
    rows = stack_rows_for(episodes, steps, (1.5, 1.0, 0.5, 0.0))  # 15, 10, 5, 0 steps back
    assert rows.shape == (len(steps), 4)
    np.testing.assert_array_equal(rows[:, -1], np.arange(len(steps)))  # the last is o_t itself
    assert (episodes[rows] == episodes[:, None]).all()  # never another episode's frame

    def steps_of(episode: int, step: int) -> list[int]:
        (i,) = np.flatnonzero((episodes == episode) & (steps == step))
        return steps[rows[i]].tolist()

    assert steps_of(5, 19) == [4, 9, 14, 19]
    assert steps_of(5, 13) == [0, 3, 7, 13]  # 13 - 5 = 8 is missing: the newest older one is 7
    assert steps_of(2, 3) == [0, 0, 0, 3]  # early in an episode: its first frame


def test_frames_with_history_input_give_stacks(tmp_path):
    write_dataset(tmp_path / "data", episodes=2, frames_per_episode=20, side=32)
    frames = load_frames(tmp_path / "data", 16, show_progress=False, image_input="rgb-history")
    stacks = frames.inputs(np.array([0, 19, 25]))
    assert stacks.shape == (3, 4, 16, 16, 3)
    np.testing.assert_array_equal(stacks[:, -1], frames.images[[0, 19, 25]])
    np.testing.assert_array_equal(stacks[1, 0], frames.images[4])  # step 19 - 15 of episode 0
    np.testing.assert_array_equal(stacks[2, 0], frames.images[20])  # episode 1's first frame
    assert load_frames(tmp_path / "data", 16, show_progress=False).inputs(np.array([0])).shape == (1, 16, 16, 3)
