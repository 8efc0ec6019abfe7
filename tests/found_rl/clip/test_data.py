import numpy as np
import pytest

from found_rl.clip.data import load_frames, split_by_episode
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
