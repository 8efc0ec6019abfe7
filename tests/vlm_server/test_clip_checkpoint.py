"""found-rl CLIP checkpoints: what the server refuses (named), and the shared preprocessing."""

import copy

import numpy as np
import pytest
import torch

from tests.vlm_server.conftest import TINY_CLIP_CONFIG
from vlm_server.backends.base import ClipItem
from vlm_server.backends.clip import OpenClipScorer
from vlm_server.clip_checkpoint import ClipCheckpoint, anchors_sha256, build_model, read_checkpoint, widen_image_stem
from vlm_server.clip_preprocess import OPENAI_MEAN, OPENAI_STD, resize_area


def save(path, cfg=TINY_CLIP_CONFIG, name="tiny", image_size=32, input_size=64, **changes):
    torch.manual_seed(0)
    state_dict = build_model(cfg).state_dict()
    checkpoint = ClipCheckpoint(
        name, cfg, image_size, input_size, OPENAI_MEAN, OPENAI_STD, anchors_sha256(), state_dict
    )
    data = checkpoint.to_dict()
    data.update(changes)
    torch.save(data, path)
    return path


def load(path, **options):
    scorer = OpenClipScorer(checkpoint=str(path), **options)
    scorer.load()
    return scorer


def test_a_checkpoint_brings_its_model_sizes_and_normalisation(tmp_path):
    scorer = load(save(tmp_path / "c.pt"))
    assert scorer.model_name == "tiny" and scorer.image_hw == (64, 64) and scorer.model_side == 32
    assert scorer.text_anchors.shape == (6, 4, 30, 16)
    # the served scorer agrees with itself on the same image sent at 64 px and pre-resized to 32
    image = np.random.default_rng(0).integers(0, 256, (1, 64, 64, 3), dtype=np.uint8)
    small = resize_area(image, 32).numpy()
    np.testing.assert_allclose(
        scorer.group_probabilities(image, [3], [2]), scorer.group_probabilities(small, [3], [2]), atol=1e-6
    )


@pytest.mark.parametrize(
    ("options", "changes", "message"),
    [
        ({"model_name": "ViT-B-16"}, {}, r"holds a 'tiny' model, not model_name='ViT-B-16'"),
        ({"image_size": 192}, {}, r"trained on 64 px BEV images \(resized to 32 px\), not image_size=192"),
        ({}, {"anchors_sha256": "0" * 64}, r"trained on another caption anchor set"),
        ({}, {"format": "something-else"}, r"format is 'something-else', expected 'found-rl-clip'"),
        ({}, {"format_version": 9}, r"format_version 9"),
        (
            {"context": "command"},
            {},
            r"trained with context 'command-speed' \(command x speed bin.*\), the server is configured for "
            r"context='command' \(command only",
        ),
        (
            {},
            {"context": "command"},
            r"trained with context 'command' .*, the server is configured for context='command-speed'",
        ),
        (
            {"image_input": "rgb-history"},
            {},
            r"trained on image input 'rgb' \(the RGB BEV of o_t\), the server is configured for "
            r"image_input='rgb-history' \(the RGB BEV of o_t stacked with those 1.5, 1, 0.5 s before\)",
        ),
        ({}, {"image_input": "rgb-history"}, r"trained on image input 'rgb-history' .* image_input='rgb' "),
        ({}, {"context": "weather"}, r"context 'weather' is not one of \['command', 'command-speed'\]"),
    ],
)
def test_a_mismatched_checkpoint_is_refused_and_named(tmp_path, options, changes, message):
    path = save(tmp_path / "c.pt", **changes)
    with pytest.raises(ValueError, match=message) as error:
        load(path, **options)
    assert str(path) in str(error.value)


def test_a_version_1_checkpoint_reads_as_a_contrastive_one_frame_model(tmp_path):
    path = save(tmp_path / "c.pt", format_version=1)
    data = torch.load(path, weights_only=True)
    for key in ("context", "image_input", "objective"):
        del data[key]
    torch.save(data, path)
    checkpoint = read_checkpoint(path)
    assert (checkpoint.context, checkpoint.image_input, checkpoint.objective) == ("command-speed", "rgb", "contrastive")
    assert load(path).objective == "contrastive"


def test_a_history_checkpoint_scores_stacks_and_ignores_the_past_at_initialisation(tmp_path):
    """The widened stem starts with zero weights on past frames: o_t alone decides, as before."""
    torch.manual_seed(0)
    model = widen_image_stem(build_model(TINY_CLIP_CONFIG), 4)
    assert model.visual.conv1.in_channels == 12
    path = save(tmp_path / "c.pt", image_input="rgb-history", state_dict=model.state_dict())
    scorer = load(path, image_input="rgb-history")
    assert scorer.history_frames == 3
    rng = np.random.default_rng(0)
    now = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    past = [tuple(rng.integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)) for _ in range(2)]
    items = [ClipItem(f"i{k}", now, 4, 3.0, (0.5, 0.0), history) for k, history in enumerate(past)]
    probs = scorer.anchor_probabilities(items)
    np.testing.assert_allclose(probs[0], probs[1], atol=1e-6)
    with pytest.raises(ValueError, match=r"item 'x': history has 0 frame\(s\), image input 'rgb-history'"):
        scorer.anchor_probabilities([ClipItem("x", now, 4, 3.0, (0.5, 0.0))])
    with pytest.raises(ValueError, match="needs a checkpoint fine-tuned on it"):
        OpenClipScorer(image_input="rgb-history")


def test_weights_of_another_architecture_are_refused(tmp_path):
    other = copy.deepcopy(TINY_CLIP_CONFIG)
    other["vision_cfg"]["width"] = 64
    path = tmp_path / "c.pt"
    save(path)
    data = torch.load(path, weights_only=True)
    torch.manual_seed(0)
    data["state_dict"] = build_model(other).state_dict()
    torch.save(data, path)
    with pytest.raises(ValueError, match=r"c\.pt: weights do not fit its tiny config"):
        load(path)


def test_a_file_that_is_not_a_checkpoint_is_named(tmp_path):
    path = tmp_path / "junk.pt"
    path.write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match=r"junk\.pt: cannot be read as a torch file"):
        read_checkpoint(path)
    with pytest.raises(FileNotFoundError, match=r"missing\.pt"):
        OpenClipScorer(checkpoint=str(tmp_path / "missing.pt"))
    with pytest.raises(ValueError, match="give checkpoint or pretrained, not both"):
        OpenClipScorer(checkpoint=str(save(tmp_path / "c.pt")), pretrained="openai")


def test_resize_area_averages_blocks_and_keeps_the_native_size():
    image = np.arange(16, dtype=np.uint8).reshape(1, 4, 4, 1).repeat(3, axis=3)
    small = resize_area(image, 2).numpy()[0, :, :, 0]
    np.testing.assert_array_equal(small, [[2, 4], [10, 12]])  # means 2.5, 4.5, 10.5, 12.5 round half to even
    assert resize_area(image, 4).numpy().tobytes() == image.tobytes()
    with pytest.raises(ValueError, match=r"expected \[B, H, W, 3\] or \[B, T, H, W, 3\] uint8"):
        resize_area(image[0], 2)
