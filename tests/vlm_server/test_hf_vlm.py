import pytest
import torch

pytest.importorskip("transformers")  # optional extra: found-rl[hf]

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
