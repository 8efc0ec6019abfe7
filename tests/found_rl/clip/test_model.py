import copy

import pytest
import torch

from found_rl.clip import model as clip_model
from found_rl.clip.model import create_clip_model
from tests.found_rl.clip.conftest import MICRO_CONFIG


def test_a_text_context_that_would_cut_the_action_words_is_refused(monkeypatch):
    short = copy.deepcopy(MICRO_CONFIG)
    short["text_cfg"]["context_length"] = 30
    monkeypatch.setitem(clip_model.SMALL_CONFIGS, "short", short)
    with pytest.raises(ValueError, match="text context of 30 tokens cannot hold the longest"):
        create_clip_model("short", None, 16)


def test_small_configs_train_with_a_fixed_token_embedding(micro_model):
    model = create_clip_model(micro_model, None, 16).model
    assert not model.token_embedding.weight.requires_grad
    assert model.visual.conv1.weight.requires_grad
    with torch.no_grad():
        assert model.encode_image(torch.zeros(2, 3, 16, 16)).shape == (2, 16)


@pytest.mark.parametrize(
    ("name", "pretrained", "size", "message"),
    [
        ("no-such-model", None, 64, "not one of found-rl's"),
        ("found-rl-vit-tiny", None, 40, "cuts 16 px patches and needs a multiple of 16"),
        ("found-rl-rn-tiny", None, 48, "ResNet tower and needs a multiple of 32"),
        ("found-rl-vit-tiny", "laion2b_s34b_b88k", 64, "has no open_clip weights"),
    ],
)
def test_bad_model_choices_are_named(name, pretrained, size, message):
    with pytest.raises(ValueError, match=message):
        create_clip_model(name, pretrained, size)


class _Tower(torch.nn.Module):
    def __init__(self, failure):
        super().__init__()
        self.failure = failure

    def encode_image(self, images):
        raise self.failure


def test_an_image_size_the_tower_cannot_take_is_the_users():
    failure = RuntimeError("The size of tensor a (50) must match the size of tensor b (37) at dimension 1")
    with pytest.raises(clip_model.UserError, match=r"--image-size 100: ViT-B-16 cannot take it"):
        clip_model._check_forward("ViT-B-16", _Tower(failure), 100, 1)


@pytest.mark.parametrize("failure", [torch.OutOfMemoryError("out of memory"), RuntimeError("a dtype bug")])
def test_any_other_failure_of_the_tower_keeps_its_traceback(failure):
    with pytest.raises(type(failure)) as raised:
        clip_model._check_forward("ViT-B-16", _Tower(failure), 224, 1)
    assert raised.value is failure
