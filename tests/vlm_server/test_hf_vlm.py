import asyncio

import numpy as np
import pytest
import torch

from tests.optional import require

require("transformers")  # optional extra: found-rl[hf]
# ruff: noqa: E402 (the imports below come after the check, as after pytest.importorskip)

from vlm_server.backends.base import AdviseItem
from vlm_server.backends.hf_vlm import HuggingFaceAdvisor


def items(rgb) -> list[AdviseItem]:
    return [
        AdviseItem("a", rgb(32, 32, seed=1), 4, 3.0),
        AdviseItem(
            "b", rgb(32, 32, seed=2), 1, 12.0, {"target_ego_xy": [4.0, -1.0]}
        ),  # longer prompt
        AdviseItem("c", None, 4, 3.0),
        AdviseItem("d", rgb(32, 32, seed=3), 2, 0.0),
    ]


def test_batched_generation_is_left_padded_and_matches_one_by_one(tiny_llava, rgb):
    processor, model = tiny_llava
    advisor = HuggingFaceAdvisor(processor=processor, model=model, max_new_tokens=6)
    advisor.load()
    assert processor.tokenizer.padding_side == "left"
    batch = advisor.advise_batch(items(rgb))
    single = [advisor.advise_batch([item])[0] for item in items(rgb)]
    assert [r.text for r in batch] == [r.text for r in single]
    assert batch[2].error == "this advisor needs an image" and batch[2].action is None
    for result in (
        batch
    ):  # random weights: answers are garbage, reported as errors with their text
        assert (result.action is None) == (result.error is not None)
    assert advisor.parse_failures == sum(
        r.error is not None and r.text is not None for r in batch + single
    )


def test_answer_tokens_are_decoded_and_parsed_by_key(tiny_llava, monkeypatch, rgb):
    processor, model = tiny_llava
    advisor = HuggingFaceAdvisor(processor=processor, model=model)
    advisor.load()
    answer = '{ "brake" : 0.0 , "steer" : -0.2 , "throttle" : 0.5 }'
    answer_ids = processor.tokenizer(
        answer, add_special_tokens=False, return_tensors="pt"
    ).input_ids

    def generate(input_ids, **kwargs):
        assert kwargs["do_sample"] is False and "pixel_values" in kwargs
        return torch.cat([input_ids, answer_ids.expand(len(input_ids), -1)], dim=1)

    monkeypatch.setattr(model, "generate", generate)
    results = advisor.advise_batch(
        [AdviseItem(str(i), rgb(32, 32), 4, 1.0) for i in range(3)]
    )
    assert [r.action for r in results] == [pytest.approx((0.5, -0.2))] * 3
    assert results[0].text.replace(" ", "") == answer.replace(" ", "")


def test_constructor_needs_a_path_or_objects():
    with pytest.raises(ValueError, match="model_path"):
        HuggingFaceAdvisor()
    with pytest.raises(ValueError, match="dtype"):
        HuggingFaceAdvisor(model_path="x", dtype="float8")


async def test_unparseable_answers_are_failed_labels_counted_and_the_batch_is_served(
    aiohttp_client, server_config, tiny_llava, monkeypatch, rgb
):
    from vlm_server.app import create_app
    from vlm_server.images import encode_image

    processor, model = tiny_llava
    tokenizer = processor.tokenizer
    good = tokenizer('{ "throttle" : 0.5 , "steer" : -0.2 , "brake" : 0.0 }', add_special_tokens=False).input_ids
    bad = tokenizer("w10 w11 w12", add_special_tokens=False).input_ids
    bad = bad + [tokenizer.pad_token_id] * (len(good) - len(bad))

    def generate(input_ids, **kwargs):  # rows alternate: a JSON answer, then words that are none
        answers = torch.tensor([good if row % 2 == 0 else bad for row in range(len(input_ids))])
        return torch.cat([input_ids, answers], dim=1)

    monkeypatch.setattr(model, "generate", generate)
    advisor = HuggingFaceAdvisor(processor=processor, model=model, image_size=32)
    client = await aiohttp_client(
        create_app(server_config(batching={"max_batch_size": 8, "max_wait_ms": 50.0}), advisor_backend=advisor)
    )
    while (await client.get("/readyz")).status != 200:
        await asyncio.sleep(0.01)
    items = [{"id": str(i), "command": 4, "speed_mps": 1.0, "image": encode_image(rgb(32, 32, seed=i))}
             for i in range(4)]
    response = await client.post("/v1/advise", json={"items": items})
    assert response.status == 200
    replies = (await response.json())["items"]
    assert [reply["ok"] for reply in replies] == [True, False, True, False]
    assert replies[0]["action"] == pytest.approx([0.5, -0.2])
    assert "unparseable answer" in replies[1]["error"] and replies[1]["text"] == "w10 w11 w12"
    assert advisor.parse_failures == 2
    metrics = await (await client.get("/metrics")).text()
    assert 'vlm_server_errors_total{backend="advisor",kind="item"} 2.0' in metrics
    again = await client.post("/v1/advise", json=items[0])  # the server goes on serving
    assert (await again.json())["ok"] is True


def test_a_folder_given_as_model_is_the_model_path(tmp_path):
    advisor = HuggingFaceAdvisor(model=str(tmp_path))  # --advisor-option model=DIR
    assert advisor.model_path == str(tmp_path) and advisor.model is None
    assert HuggingFaceAdvisor(model=tmp_path, model_path=str(tmp_path)).model_path == str(tmp_path)
    with pytest.raises(ValueError, match="model or as model_path, not both"):
        HuggingFaceAdvisor(model=str(tmp_path), model_path="other")


def test_fast_inputs_equal_the_processors(tiny_llava, rgb):
    from PIL import Image

    from vlm_server.answers import build_prompt
    from vlm_server.backends.hf_inputs import fast_inputs
    from vlm_server.backends.hf_vlm import chat_prompt_text

    processor, _ = tiny_llava
    prompts = [build_prompt(4, 0.0), build_prompt(1, 12.5, {"target_ego_xy": [6.25, -1.5]}), build_prompt(2, 3.1)]
    made = fast_inputs(processor, lambda p: chat_prompt_text(processor, p), prompts[:2], (192, 192))
    assert made is not None
    prompt_ids, pixels = made
    for size in (192, 32, 50):  # downscaled, as it is, upscaled
        images = np.stack([rgb(size, size, seed=s) for s in range(5)])
        reference = processor.image_processor([Image.fromarray(i) for i in images], return_tensors="pt")
        assert torch.allclose(pixels(images), reference["pixel_values"], atol=1e-5, rtol=0)
    texts = [chat_prompt_text(processor, p) for p in prompts]
    reference = processor(text=texts, images=[Image.fromarray(rgb(32, 32))] * 3, return_tensors="pt", padding=True)
    for _ in range(2):  # tokenised, then from the cache
        input_ids, attention_mask = prompt_ids.batch(prompts)
        assert torch.equal(input_ids, reference["input_ids"])
        assert torch.equal(attention_mask, reference["attention_mask"])
    assert (prompt_ids.misses, prompt_ids.hits) == (1, 5)  # the two probes were tokenised by the check
    prompt_ids.cache_size = 2
    prompt_ids.batch(prompts)
    assert len(prompt_ids._cache) == 2  # bounded: the least recently used prompt goes


def test_fast_inputs_answer_as_the_processor_does(tiny_llava, rgb):
    processor, model = tiny_llava
    fast = HuggingFaceAdvisor(processor=processor, model=model, max_new_tokens=6, image_size=32)
    fast.load()
    assert fast.fast_inputs is not None and fast.decoder is None  # no answer template: generate decodes
    slow = HuggingFaceAdvisor(processor=processor, model=model, max_new_tokens=6, image_size=32, fast_inputs=False)
    slow.load()
    assert slow.fast_inputs is None  # the processor, as before
    batch = items(rgb)
    assert [r.text for r in fast.advise_batch(batch)] == [r.text for r in slow.advise_batch(batch)]


def test_torch_threads_are_applied_at_load_and_kept(tiny_llava):
    processor, model = tiny_llava
    before = torch.get_num_threads()
    try:
        advisor = HuggingFaceAdvisor(processor=processor, model=model, torch_threads=1)
        advisor.load()
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        advisor._keep_threads()  # advise_batch re-applies it (OpenMP keeps the setting per thread)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert HuggingFaceAdvisor(processor=processor, model=model).torch_threads is None  # torch's default


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True, "auto"])
def test_a_bad_torch_threads_is_refused_naming_it(value):
    from vlm_server.backends.base import load_backend

    with pytest.raises(ValueError, match="torch_threads must be an int >= 1"):
        HuggingFaceAdvisor(model_path="x", torch_threads=value)
    with pytest.raises(ValueError, match="torch_threads"):
        load_backend("hf", {"model_path": "x", "torch_threads": value})


def test_torch_threads_comes_from_the_command_line_as_an_int():
    from vlm_server.cli import parse_options

    assert parse_options(["torch_threads=1"], "--advisor-option") == {"torch_threads": 1}
