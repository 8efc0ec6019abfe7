"""The auxiliary action head: targets worked out by hand, its start, and the image tokens it reads."""

import math

import pytest
import torch

from found_rl.vlm.aux_action import (
    ActionHead,
    ImageTokenTap,
    action_loss,
    action_targets,
    image_projector,
)
from found_rl.vlm.batches import encode_batch
from found_rl.vlm.examples import ChatExample, load_chat_examples


def example(command: int, speed_mps: float, action: tuple[float, float]) -> ChatExample:
    return ChatExample(key="k", png=b"", prompt="", answer="", command=command, speed_mps=speed_mps,
                       target_ego=(8.0, 0.0), action=action, episode=0)


def test_targets_are_the_command_speed_group_and_the_answer_class_after_rounding():
    contexts, classes = action_targets([
        example(1, 0.0, (1.0, 0.0)),  # turn left, stopped; full throttle, straight
        example(4, 5.0, (-1.0, 0.049)),  # follow the lane, fast; full brake, steer written as 0.05
    ])
    # group = command row * 4 + speed bin; class = lon * 5 + lat (METHOD §3)
    assert contexts.tolist() == [0 * 4 + 0, 3 * 4 + 3]
    assert classes.tolist() == [2 * 5 + 0, 0 * 5 + 2]  # 0.05 is "turning right": the class vlm evaluate scores


def test_untrained_head_predicts_uniformly():
    head = ActionHead(feature_dim=8)
    with torch.no_grad():
        logits = head(torch.randn(3, 5, 8), torch.tensor([0, 7, 23]))
        loss, _ = action_loss(logits, torch.tensor([0, 10, 29]))
    assert torch.equal(logits, torch.zeros(3, 30))
    assert float(loss) == pytest.approx(math.log(30))


def test_accuracy_counts_the_argmax_hits():
    logits = torch.tensor([[0.0, 2.0], [3.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    _, accuracy = action_loss(logits, torch.tensor([1, 0, 0, 1]))
    assert float(accuracy) == 0.5


def test_tap_reads_the_same_image_tokens_from_a_full_forward_and_from_the_image_features(
    tiny_vlm_dir, expert_data
):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(tiny_vlm_dir)
    processor = AutoProcessor.from_pretrained(tiny_vlm_dir)
    batch = encode_batch(processor, load_chat_examples(expert_data)[:3])
    _, projector = image_projector(model, "tiny")
    tap = ImageTokenTap(projector)
    with torch.no_grad():
        model(**batch)
        full = tap.take(3)
        model.get_image_features(pixel_values=batch["pixel_values"])
        alone = tap.take(3)
    assert full.shape == (3, 4, 32)  # 32 px / 16 px patches, text width 32
    torch.testing.assert_close(alone, full)
    tap.remove()


def test_a_model_without_an_image_projector_is_refused_naming_the_flag():
    with pytest.raises(ValueError, match="--aux-action-weight: model m has no image projector"):
        image_projector(torch.nn.Sequential(torch.nn.Linear(2, 2)), "m")
