"""Shard write -> read round trip, manifest, and refusing to mix datasets."""

import json
import tarfile

import numpy as np
import pytest

from found_rl.dataset import ShardWriter, chat_sample, clip_caption, iter_samples, read_manifest


def write_samples(directory, count: int, per_shard: int) -> list[dict]:
    rng = np.random.default_rng(0)
    written = []
    with ShardWriter(directory, samples_per_shard=per_shard, settings={"steps": count}) as writer:
        for i in range(count):
            bev = rng.integers(0, 256, (192, 192, 3), dtype=np.uint8)
            masks = (rng.random((15, 192, 192)) > 0.9).astype(np.uint8) * 255
            action = [0.5 - 0.1 * i, 0.02 * i]
            metadata = {
                "state": list(np.linspace(0, 1, 10)),
                "command": 4,
                "speed_mps": 3.0 + i,
                "action": action,
                "executed_action": [action[0], action[1] + 0.1],
                "target_ego": [5.0, 0.5],
                "meta": {"episode": 0, "step": i, "is_perturbed": i % 2 == 1},
            }
            caption = clip_caption(4, 3.0 + i, *action)
            writer.write(bev, masks, metadata, caption, chat_sample(3.0 + i, (5.0, 0.5), 4, *action))
            written.append({"bev": bev, "masks": masks, "caption": caption, **metadata})
    return written


def test_round_trip_keeps_every_field(tmp_path):
    written = write_samples(tmp_path / "data", count=5, per_shard=2)
    manifest = read_manifest(tmp_path / "data")
    assert manifest["num_samples"] == 5
    assert [s["samples"] for s in manifest["shards"]] == [2, 2, 1]
    samples = list(iter_samples(tmp_path / "data"))
    assert [s.key for s in samples] == [f"{i:09d}" for i in range(5)]
    for sample, expected in zip(samples, written, strict=True):
        np.testing.assert_array_equal(sample.bev_rgb, expected["bev"])
        np.testing.assert_array_equal(sample.masks, expected["masks"])
        np.testing.assert_allclose(sample.action, expected["action"], rtol=1e-6)
        np.testing.assert_allclose(sample.state, expected["state"], rtol=1e-6)
        assert sample.caption == expected["caption"]
        assert sample.speed_mps == expected["speed_mps"]
        assert sample.meta["step"] == expected["meta"]["step"]
        answer = json.loads(sample.chat["conversations"][1]["value"])
        assert list(answer) == ["throttle", "steer", "brake"]


def test_shards_are_webdataset_groups_with_png_and_txt(tmp_path):
    write_samples(tmp_path / "data", count=2, per_shard=10)
    with tarfile.open(tmp_path / "data" / "shard-000000.tar") as tar:
        names = tar.getnames()
    assert names[:5] == [
        "000000000.png",
        "000000000.txt",
        "000000000.masks.npz",
        "000000000.json",
        "000000000.chat.json",
    ]


def test_writer_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        ShardWriter(tmp_path)


def test_reader_names_a_folder_without_manifest(tmp_path):
    with pytest.raises(FileNotFoundError, match="manifest"):
        list(iter_samples(tmp_path))
