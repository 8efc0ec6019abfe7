"""``vlm init``'s from-scratch advisor loads in every consumer: fine-tuning, evaluation and the server's hf backend."""

import json

import numpy as np
import pytest

from found_rl.errors import UserError
from found_rl.vlm.batches import IGNORE_INDEX, encode_batch
from found_rl.vlm.config import FinetuneConfig
from found_rl.vlm.evaluate import evaluate
from found_rl.vlm.examples import load_chat_examples
from found_rl.vlm.finetune import Finetuner
from found_rl.vlm.scratch import INIT_MARK, PRESETS, ArchitectureChanges, init_advisor, untrained_card
from vlm_server.backends.base import AdviseItem
from vlm_server.backends.hf_checks import ADVISOR_CARD
from vlm_server.backends.hf_vlm import HuggingFaceAdvisor


@pytest.fixture(scope="module")
def scratch_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("scratch") / "model"
    init_advisor(directory, "tiny", seed=0)
    return directory


def test_card_marks_the_model_untrained_with_its_size(scratch_model):
    card = untrained_card(scratch_model)
    assert card is not None and card["trained_by"] == INIT_MARK and card["preset"] == "tiny"
    assert card["image_hw"] == [192, 192] and card["finetune"]["method"] == "full"
    assert card["parameters"] > 0 and card["image_tokens"] == PRESETS["tiny"].image_tokens


def test_the_hf_backend_serves_it_on_192_px_bevs(scratch_model):
    rgb_image = np.random.default_rng(0).integers(0, 256, (192, 192, 3), dtype=np.uint8)
    advisor = HuggingFaceAdvisor(model_path=str(scratch_model), max_new_tokens=4)
    advisor.load()
    assert advisor.image_hw == (192, 192)
    results = advisor.advise_batch([AdviseItem("a", rgb_image, 4, 3.0, {"target_ego_xy": [5.0, -1.0]})])
    assert len(results) == 1 and (results[0].action is None) == (results[0].error is not None)


def test_a_training_row_is_image_tokens_plus_about_two_dozen_text_tokens(expert_data, tmp_path):
    from transformers import AutoProcessor

    init_advisor(tmp_path / "small", "small")
    processor = AutoProcessor.from_pretrained(tmp_path / "small")
    batch = encode_batch(processor, load_chat_examples(expert_data)[:2])
    image_tokens = PRESETS["small"].image_tokens
    assert int((batch["input_ids"][0] == processor.tokenizer.convert_tokens_to_ids("<image>")).sum()) == image_tokens
    assert batch["input_ids"].shape[1] <= image_tokens + 26
    assert int((batch["labels"][0] != IGNORE_INDEX).sum()) == 11  # the answer's 10 tokens and the end token


def test_finetune_trains_it_fully_and_the_export_is_no_longer_untrained(expert_data, scratch_model, tmp_path):
    settings = {"data": str(expert_data), "model": str(scratch_model), "batch_size": 4, "eval_every": 0}
    with pytest.raises(ValueError, match=r"--lora: model .* initialised from scratch .* --full"):
        Finetuner(FinetuneConfig(out=str(tmp_path / "lora"), method="lora", steps=1, **settings))
    finetuner = Finetuner(
        FinetuneConfig(out=str(tmp_path / "run"), method="full", steps=6, learning_rate=1e-2, **settings),
        show_progress=False,
    )
    before = finetuner.eval_loss_on(finetuner.train[:4])
    finetuner.run()
    assert finetuner.eval_loss_on(finetuner.train[:4]) < before - 0.5
    model = tmp_path / "run" / "model"
    assert untrained_card(model) is None
    assert json.loads((model / ADVISOR_CARD).read_text())["trained_by"] == "found-rl vlm finetune"
    report = evaluate(finetuner.held_out, str(model), batch_size=4, max_new_tokens=12, show_progress=False)
    assert report["samples"] == len(finetuner.held_out) and 0.0 <= report["parse_rate"] <= 1.0


def test_unknown_preset_is_refused_naming_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="--preset must be one of tiny, small"):
        init_advisor(tmp_path / "m", "huge")


def test_size_flags_resize_the_preset_and_the_card_records_them(tmp_path):
    from transformers import AutoConfig

    changes = ArchitectureChanges(image_px=48, patch_px=8, hidden=64, layers=3)
    card = init_advisor(tmp_path / "resized", "tiny", changes=changes)
    assert card["changes"] == {"image_px": 48, "patch_px": 8, "hidden": 64, "layers": 3}
    assert card["image_tokens"] == 36 and card["architecture"]["vision_heads"] == 2
    config = AutoConfig.from_pretrained(tmp_path / "resized")
    assert (config.vision_config.image_size, config.vision_config.patch_size) == (48, 8)
    assert (config.text_config.hidden_size, config.text_config.num_hidden_layers) == (64, 3)
    assert config.text_config.num_attention_heads == 2


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (ArchitectureChanges(image_px=50), r"--image-px 50 must be a multiple of --patch-px 16"),
        (ArchitectureChanges(hidden=48), r"--hidden must be a multiple of 32"),
    ],
)
def test_size_flags_the_towers_cannot_take_are_refused_by_name(changes, message):
    with pytest.raises(UserError, match=message):
        changes.apply(PRESETS["tiny"])
