"""The HF advisor refuses checkpoints it could not serve, naming the model and the sizes involved."""

import asyncio
import copy
import json

import pytest
import torch

from tests.optional import require

require("transformers")  # optional extra: found-rl[hf]
# ruff: noqa: E402 (the imports below come after the check, as after pytest.importorskip)

from vlm_server.app import create_app
from vlm_server.backends.hf_checks import ADVISOR_CARD, check_image_size
from vlm_server.backends.hf_vlm import HuggingFaceAdvisor
from vlm_server.images import encode_image


@pytest.fixture
def passthrough_processor(tiny_llava):
    """The tiny processor without resizing: images reach the 32 px vision tower at their own size."""
    processor = copy.deepcopy(tiny_llava[0])
    processor.image_processor.do_resize = False
    processor.image_processor.do_center_crop = False
    return processor


def test_model_that_cannot_take_the_bev_size_is_refused_naming_both(tiny_llava, passthrough_processor):
    advisor = HuggingFaceAdvisor(processor=passthrough_processor, model=tiny_llava[1], image_size=48)
    with pytest.raises(ValueError, match=r"cannot take 48x48 BEV images \(its vision tower is built for 32x32 px\)"):
        advisor.load()
    fitting = HuggingFaceAdvisor(processor=passthrough_processor, model=tiny_llava[1], image_size=32)
    fitting.load()  # the size it was built for passes
    assert fitting.image_hw == (32, 32)


async def test_server_reports_the_refusal_and_refuses_other_image_sizes(
    aiohttp_client, server_config, tiny_llava, passthrough_processor, rgb
):
    refused = await aiohttp_client(
        create_app(server_config(), advisor_backend=HuggingFaceAdvisor(
            processor=passthrough_processor, model=tiny_llava[1], image_size=48))
    )
    while (reply := await (await refused.get("/readyz")).json())["status"] == "loading":
        await asyncio.sleep(0.01)
    assert reply["status"] == "failed" and "cannot take 48x48 BEV images" in reply["backends"]["advisor"]

    serving = await aiohttp_client(
        create_app(server_config(), advisor_backend=HuggingFaceAdvisor(
            processor=tiny_llava[0], model=tiny_llava[1], image_size=32, max_new_tokens=2))
    )
    while (await serving.get("/readyz")).status != 200:
        await asyncio.sleep(0.01)
    body = {"id": "a", "command": 4, "speed_mps": 1.0, "image": encode_image(rgb(48, 48))}
    response = await serving.post("/v1/advise", json=body)
    assert response.status == 400
    assert "image is 48x48 px, this backend expects 32x32" in (await response.json())["error"]
    body["image"] = encode_image(rgb(32, 32))
    assert (await serving.post("/v1/advise", json=body)).status == 200


def test_image_size_defaults_to_the_fine_tuning_card_else_the_bev_default(tiny_llava, tmp_path):
    processor, model = tiny_llava
    advisor = HuggingFaceAdvisor(processor=processor, model=model)
    advisor.load()
    assert advisor.image_hw == (192, 192)
    (tmp_path / ADVISOR_CARD).write_text(json.dumps({"image_hw": [96, 96]}))
    carded = HuggingFaceAdvisor(model_path=str(tmp_path), processor=processor, model=model)
    carded.load()
    assert carded.image_hw == (96, 96)
    (tmp_path / ADVISOR_CARD).write_text(json.dumps({"image": 96}))
    with pytest.raises(ValueError, match=r"found_rl_advisor.json: expected"):
        HuggingFaceAdvisor(model_path=str(tmp_path), processor=processor, model=model).load()


@pytest.mark.parametrize("size", [0, -3, 1.5, True, "192"])
def test_image_size_option_is_checked(size):
    with pytest.raises(ValueError, match="image_size must be an int >= 1"):
        HuggingFaceAdvisor(model_path="x", image_size=size)


def test_folder_that_is_not_an_image_text_to_text_checkpoint_is_refused(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    with pytest.raises(ValueError, match=rf"model {tmp_path}: no config\.json there \(the folder is empty\)"):
        HuggingFaceAdvisor(model_path=str(tmp_path)).load()
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ValueError, match=r"no config\.json there \(it holds weights\.bin\)"):
        HuggingFaceAdvisor(model_path=str(tmp_path)).load()
    (tmp_path / "weights.bin").unlink()
    LlamaForCausalLM(
        LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=1)
    ).save_pretrained(tmp_path)
    with pytest.raises(
        ValueError, match=r"model type 'llama' \(architectures: LlamaForCausalLM\) is not an image-text-to-text model"
    ):
        HuggingFaceAdvisor(model_path=str(tmp_path)).load()
    with pytest.raises(FileNotFoundError, match="no such folder"):
        HuggingFaceAdvisor(model_path=str(tmp_path / "missing")).load()


def test_processor_without_chat_template_is_named_with_the_fix(tiny_llava):
    processor = copy.deepcopy(tiny_llava[0])
    processor.chat_template = None
    with pytest.raises(ValueError, match=r"no chat template.*chat_template.jinja"):
        HuggingFaceAdvisor(processor=processor, model=tiny_llava[1]).load()


class _Inputs(dict):
    def to(self, device):
        return self


class _FailingModel:
    """A model whose forward pass raises ``failure``; its config says its tower takes 32 px."""

    device = "cpu"

    def __init__(self, failure):
        self.failure = failure
        self.config = type("Config", (), {"vision_config": type("Vision", (), {"image_size": 32})()})()

    def __call__(self, **inputs):
        raise self.failure


def _processor(text, images, return_tensors):
    return _Inputs(pixel_values=None)


@pytest.mark.parametrize(
    "failure",
    [
        ValueError("Image features and image tokens do not match: tokens: 4, features 9"),
        RuntimeError("The size of tensor a (10) must match the size of tensor b (5) at non-singleton dimension 1"),
    ],
)
def test_only_an_image_size_failure_is_blamed_on_the_bev_size(failure):
    with pytest.raises(ValueError, match=r"model m: its processor cannot take 48x48 BEV images \(its vision tower is "
                                         r"built for 32x32 px\)") as raised:
        check_image_size(_processor, _FailingModel(failure), (48, 48), "prompt", "m")
    assert raised.value.__cause__ is None  # one line for the user: the size, not transformers' internals


@pytest.mark.parametrize(
    "failure",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("Input type (float) and bias type (c10::BFloat16) should be the same"),
        KeyError("pixel_values"),
    ],
)
def test_any_other_failure_of_the_pass_keeps_its_type_and_traceback(failure):
    with pytest.raises(type(failure)) as raised:
        check_image_size(_processor, _FailingModel(failure), (48, 48), "prompt", "m")
    assert raised.value is failure and "cannot take" not in str(raised.value)
