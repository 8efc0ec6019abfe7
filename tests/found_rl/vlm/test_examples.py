"""Reading chat examples from expert shards and splitting them by whole episodes."""

import json

import numpy as np
import pytest

from found_rl.dataset.text import chat_answer, chat_prompt
from found_rl.vlm.examples import load_chat_examples, load_datasets, select_split, split_episodes


def test_examples_carry_the_servers_prompt_and_the_expert_answer(expert_data):
    examples = load_chat_examples(expert_data)
    assert len(examples) == 20
    assert [e.episode for e in examples] == [e // 5 for e in range(20)]
    for example in examples:
        assert "<image>" + "\n" + example.prompt == chat_prompt(example.speed_mps, example.target_ego, example.command)
        assert example.answer == chat_answer(*example.action)
        assert example.image().shape == (192, 192, 3) and example.image().dtype == np.uint8


@pytest.mark.parametrize(("episodes", "fraction", "held_out"), [(10, 0.1, 1), (10, 0.25, 2), (3, 0.9, 2), (7, 0.0, 0)])
def test_split_holds_out_whole_episodes(episodes, fraction, held_out):
    train, evaluation = split_episodes(range(episodes), fraction, seed=3)
    assert len(evaluation) == held_out
    assert train | evaluation == set(range(episodes)) and not train & evaluation
    assert (train, evaluation) == split_episodes(reversed(range(episodes)), fraction, seed=3)


def test_split_names_the_fix_when_no_episode_can_be_held_out():
    with pytest.raises(ValueError, match=r"1 episode.*--eval-fraction 0"):
        split_episodes([0, 0, 0], 0.1, seed=0)
    with pytest.raises(ValueError, match="--eval-fraction must be in"):
        split_episodes([0, 1], 1.0, seed=0)


def test_select_split_partitions_the_samples(expert_data):
    examples = load_chat_examples(expert_data)
    train = select_split(examples, "train", 0.25, 0)
    held_out = select_split(examples, "eval", 0.25, 0)
    assert len(train) + len(held_out) == len(examples) == len(select_split(examples, "all", 0.25, 0))
    assert not {e.episode for e in train} & {e.episode for e in held_out}


def test_several_datasets_are_one_set_whose_episodes_stay_apart(expert_data, dataset_writer, tmp_path):
    other = dataset_writer(tmp_path / "round1", episodes=3, steps=2, seed=1)
    union = load_datasets([expert_data, other])
    assert len(union) == 20 + 6
    assert [e.episode for e in union] == [e // 5 for e in range(20)] + [4 + e // 2 for e in range(6)]
    assert [e.key for e in union[20:]] == [e.key for e in load_chat_examples(other)]
    assert load_datasets([expert_data]) == load_chat_examples(expert_data)


def test_folder_without_a_dataset_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no dataset manifest"):
        load_chat_examples(tmp_path)


def test_dataset_without_samples_is_refused(tmp_path, dataset_writer):
    data = dataset_writer(tmp_path / "d", episodes=0)
    with pytest.raises(ValueError, match=r"no chat samples.*expert collect"):
        load_chat_examples(data)


def test_sample_without_chat_member_is_named(tmp_path, dataset_writer, drop_shard_members):
    data = dataset_writer(tmp_path / "d", episodes=1, steps=2)
    drop_shard_members(data / "shard-000000.tar", ".chat.json")
    with pytest.raises(ValueError, match=r"shard-000000.tar: sample 000000000: lacks chat.json.*no chat turn"):
        load_chat_examples(data)


def test_malformed_chat_member_is_named(tmp_path, dataset_writer):
    from found_rl.dataset import ShardWriter

    with ShardWriter(tmp_path / "d") as writer:
        writer.write(
            bev_rgb=np.zeros((8, 8, 3), np.uint8),
            masks=np.zeros((1, 2, 2), np.uint8),
            metadata={"command": 4, "speed_mps": 1.0, "action": [0.1, 0.0], "target_ego": [1.0, 0.0]},
            caption="c",
            chat={"conversations": [{"from": "human", "value": json.dumps("no image token")}]},
        )
    with pytest.raises(ValueError, match="sample 000000000: malformed chat sample"):
        load_chat_examples(tmp_path / "d")
