"""Towns of CLIP frames: read from the shards, broken down per town, and a checkpoint's training towns.

The per-town rows are checked on frames whose answers are known by hand: in town A the image
names the expert's action, in town B it names a far one.
"""

import numpy as np
import pytest

from found_rl.clip.data import ClipFrames, load_frames
from found_rl.clip.evaluate import ANCHOR_GROUPS, RecordedPriors, dataset_fingerprint, evaluate
from found_rl.clip.towns import frames_networks, town_names, training_networks
from tests.found_rl.clip.test_lift import ACTIONS, FOLLOW_HIGH, FOLLOW_MODERATE, ImageReader, make_frames
from tests.town_datasets import Row, write_town_dataset
from vlm_server.anchors import NUM_ACTIONS

UNIFORM = np.full((ANCHOR_GROUPS, NUM_ACTIONS), 1.0 / NUM_ACTIONS)


def two_towns(n_a: int = 60, n_b: int = 40, seed: int = 0) -> ClipFrames:
    """Town A first (the image names the expert's action), then town B (it names another of ACTIONS)."""
    rng = np.random.default_rng(seed)
    n = n_a + n_b
    groups = np.where(rng.random(n) < 0.5, FOLLOW_MODERATE, FOLLOW_HIGH)
    picks = rng.integers(0, len(ACTIONS), n)
    actions = ACTIONS[picks]
    images = rng.integers(100, 256, (n, 4, 4, 3), dtype=np.uint8)
    images[:, 0, 0, 0] = np.where(np.arange(n) < n_a, actions, ACTIONS[(picks + 1) % len(ACTIONS)])
    frames = make_frames(groups, actions, images, frames_per_episode=10)
    towns = np.array(["A"] * n_a + ["B"] * n_b)
    return ClipFrames(
        frames.pool, frames.stack_rows, frames.caption_ids, frames.episodes, frames.input_size,
        towns, np.char.add("net-", np.char.lower(towns)),
    )


def test_each_town_is_scored_alone_and_the_whole_is_unchanged():
    frames = two_towns()
    everything = np.ones(len(frames), dtype=bool)
    result = evaluate(
        ImageReader(), frames, everything, "whole", recorded=RecordedPriors(UNIFORM, UNIFORM),
        towns=town_names(frames),
    )
    assert list(result.per_town) == ["A", "B"]
    town_a, town_b = result.per_town["A"], result.per_town["B"]
    assert (town_a.quality.frames, town_b.quality.frames) == (60, 40)
    assert town_a.quality.top1 == 1.0 and town_b.quality.top1 == 0.0  # the image names another action in B
    assert result.quality.top1 == pytest.approx(0.6)
    assert town_a.quality.auc == 1.0 and town_b.quality.auc < 0.5
    assert town_a.evidence.auc_lift == pytest.approx(0.5) and town_b.evidence.auc_lift < 0
    assert town_a.prior.auc == pytest.approx(0.5) and town_a.scope == "A"
    alone = evaluate(ImageReader(), frames.subset(frames.towns == "B"), np.ones(40, dtype=bool), "B",
                     recorded=RecordedPriors(UNIFORM, UNIFORM))
    assert town_b.quality == alone.quality and town_b.prior == alone.prior
    without_towns = evaluate(ImageReader(), frames, everything, "whole", recorded=RecordedPriors(UNIFORM, UNIFORM))
    assert without_towns.per_town == {} and without_towns.quality == result.quality


def test_without_a_prior_the_towns_have_quality_only():
    frames = two_towns()
    result = evaluate(ImageReader(), frames, np.ones(len(frames), dtype=bool), "whole", towns=town_names(frames))
    assert result.evidence is None and result.per_town["A"].evidence is None
    assert result.per_town["A"].quality.top1 == 1.0


def test_frames_without_towns_have_no_names_or_networks():
    frames = two_towns()
    old = ClipFrames(frames.pool, frames.stack_rows, frames.caption_ids, frames.episodes, frames.input_size)
    assert town_names(old) is None and frames_networks(old) == {}
    assert frames_networks(frames) == {"net-a": "A", "net-b": "B"}


def test_load_frames_reads_towns_and_caches_them(tmp_path):
    rows = [Row(0, "A", "net-a")] * 3 + [Row(1, None, "net-b")] * 2 + [Row(2, None, None)]
    write_town_dataset(tmp_path / "data", rows, image_px=32)
    for _ in range(2):  # decoded, then from the cache
        frames = load_frames(tmp_path / "data", 16, show_progress=False)
        assert frames.towns.tolist() == ["A"] * 3 + [""] * 3
        assert town_names(frames) == ["A"] * 3 + ["net-b"] * 2 + ["unknown"]
        assert frames_networks(frames.subset(frames.episodes > 0)) == {"net-b": "net-b"}


def test_training_networks_recorded_then_read_from_the_training_data(tmp_path):
    rows = [Row(0, "A", "net-a"), Row(1, "B", "net-b"), Row(2, "C", "net-c")]
    write_town_dataset(tmp_path / "train", rows, image_px=32)
    write_town_dataset(tmp_path / "other", [Row(0, "D", "net-d")], image_px=32)
    train = load_frames(tmp_path / "train", 16, show_progress=False)
    other = load_frames(tmp_path / "other", 16, show_progress=False)
    recorded = {"training_towns": {"net-x": "X"}, "data": str(tmp_path / "train"), "held_out_episodes": [2]}
    assert training_networks(recorded, other, tmp_path / "other") == {"net-x": "X"}
    older = {"data": str(tmp_path / "train"), "held_out_episodes": [2]}  # a checkpoint that predates the record
    assert training_networks(older, other, tmp_path / "other") == {"net-a": "A", "net-b": "B"}
    same = {**older, "data": str(tmp_path / "gone"), "data_sha256": dataset_fingerprint(tmp_path / "train")}
    assert training_networks(same, train, tmp_path / "train") == {"net-a": "A", "net-b": "B"}
    assert training_networks({**older, "data": str(tmp_path / "gone")}, other, tmp_path / "other") is None
    write_town_dataset(tmp_path / "old", [Row(0, None, None), Row(1, None, None)], image_px=32)
    assert training_networks({"training_towns": {}, "data": str(tmp_path / "old")}, other, tmp_path / "other") is None
