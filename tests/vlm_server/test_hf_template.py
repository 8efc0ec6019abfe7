"""Templated decoding of ``found-rl vlm init`` models against greedy ``generate`` (the reference).

A random model never writes a well-formed answer, so one test first teaches a tiny
``vlm init`` model the answer (a few hundred milliseconds of training): wherever greedy
decoding then writes the template, the templated decoder must give the same tokens; everywhere
else its answer must still parse.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.optional import require

require("transformers")  # optional extra: found-rl[hf]
torch = pytest.importorskip("torch")

from vlm_server.answers import parse_answer  # noqa: E402
from vlm_server.backends.base import AdviseItem  # noqa: E402
from vlm_server.backends.hf_template import AnswerTemplate  # noqa: E402
from vlm_server.backends.hf_vlm import HuggingFaceAdvisor  # noqa: E402

ANSWERS = {1: (0.35, -0.12, 0.0), 2: (0.0, 0.5, 0.8), 3: (1.0, -0.05, 0.0), 4: (0.6, 0.0, 0.0)}
"""What the taught model answers for each command (its image and speed vary)."""


def advise_items(count: int, seed: int = 0) -> list[AdviseItem]:
    rng = np.random.default_rng(seed)
    items = []
    for index in range(count):
        cells = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
        state = {"target_ego_xy": [float(rng.uniform(0, 9)), float(rng.uniform(-2, 2))]} if index % 3 else None
        items.append(AdviseItem(str(index), np.repeat(np.repeat(cells, 8, 0), 8, 1), 1 + index % 4,
                                float(rng.uniform(0, 12)), state))
    return items


@pytest.fixture(scope="module")
def init_model(tmp_path_factory):
    from found_rl.vlm.scratch import init_advisor

    directory = tmp_path_factory.mktemp("vlm-init") / "tiny"
    init_advisor(directory, preset="tiny", seed=3)
    return directory


def loaded(model_dir, **options) -> HuggingFaceAdvisor:
    advisor = HuggingFaceAdvisor(model_path=str(model_dir), max_new_tokens=16, **options)
    advisor.load()
    return advisor


def greedy_tokens(advisor: HuggingFaceAdvisor, items: list[AdviseItem]):
    inputs = advisor.model_inputs(items)
    with torch.inference_mode():
        output = advisor.model.generate(**inputs, max_new_tokens=advisor.max_new_tokens, do_sample=False)
    return output[:, inputs["input_ids"].shape[1]:]


def templated_tokens(advisor: HuggingFaceAdvisor, items: list[AdviseItem]):
    with torch.inference_mode():
        return advisor.decoder(advisor.model_inputs(items))


def well_formed(row, template: AnswerTemplate) -> bool:
    """Greedy wrote the template: its fixed tokens, a number word in each slot, then the end token."""
    expected_length = template.length + 1
    row = row.tolist()
    if len(row) < expected_length or row[template.length] != template.eos_token_id:
        return False
    position = 0
    for index, run in enumerate(template.fixed):
        if row[position:position + len(run)] != list(run):
            return False
        position += len(run)
        if index < len(template.fixed) - 1:
            if row[position] not in template.integers or row[position + 1] not in template.fractions:
                return False
            position += 2
    return True


def teach(advisor: HuggingFaceAdvisor, steps: int = 150) -> None:
    """Train the model to answer ``ANSWERS[command]`` (the answer format, and reading the prompt)."""
    tokenizer = advisor.processor.tokenizer
    model = advisor.model
    items = advise_items(32, seed=1)
    answers = [json.dumps(dict(zip(("throttle", "steer", "brake"), ANSWERS[i.command]))) for i in items]
    answer_ids = torch.tensor([tokenizer(a, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                               for a in answers])
    inputs = advisor.model_inputs(items)
    input_ids = torch.cat([inputs["input_ids"], answer_ids], dim=1)
    attention_mask = torch.cat([inputs["attention_mask"], torch.ones_like(answer_ids)], dim=1)
    labels = torch.cat([torch.full_like(inputs["input_ids"], -100), answer_ids], dim=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    torch.manual_seed(0)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=input_ids, attention_mask=attention_mask, pixel_values=inputs["pixel_values"],
                     labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def test_vlm_init_tokenizers_have_a_template_others_do_not(init_model, tiny_llava):
    template = AnswerTemplate.detect(loaded(init_model).processor.tokenizer)
    assert template is not None and template.length == 10 and len(template.fixed) == 4
    assert AnswerTemplate.detect(tiny_llava[0].tokenizer) is None  # whitespace words: generate decodes


def test_templated_answers_of_a_random_model_always_parse_and_match_a_plain_forward(init_model):
    advisor = loaded(init_model)
    assert advisor.decoder is not None
    items = advise_items(6)
    inputs = advisor.model_inputs(items)
    tokens = templated_tokens(advisor, items)
    assert advisor.decoder.calls == 6  # one prefill, then one call per remaining number slot
    texts = advisor.processor.batch_decode(tokens, skip_special_tokens=True)
    assert all(parse_answer(text).action is not None for text in texts)
    # the cached, left-padded calls choose what one uncached forward over the whole answer chooses
    template = advisor.decoder.template
    full_ids = torch.cat([inputs["input_ids"], tokens], dim=1)
    mask = torch.ones_like(full_ids)
    mask[:, :inputs["input_ids"].shape[1]] = inputs["attention_mask"]
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
    with torch.inference_mode():
        logits = advisor.model(input_ids=full_ids, attention_mask=mask, position_ids=positions,
                               pixel_values=inputs["pixel_values"]).logits
    start = inputs["input_ids"].shape[1]
    for slot, allowed in zip((1, 2, 4, 5, 7, 8), [template.integers, template.fractions] * 3):
        allowed = torch.tensor(allowed)
        expected = allowed[logits[:, start + slot - 1].index_select(-1, allowed).argmax(-1)]
        assert torch.equal(tokens[:, slot], expected)


def test_templated_decoding_equals_greedy_wherever_greedy_is_well_formed(init_model):
    advisor = loaded(init_model)
    teach(advisor)
    items = advise_items(24, seed=2)
    greedy = greedy_tokens(advisor, items)
    templated = templated_tokens(advisor, items)
    formed = [well_formed(row, advisor.decoder.template) for row in greedy]
    assert sum(formed) >= len(items) // 2  # the lesson took: most greedy answers are the template
    for row, ok in enumerate(formed):
        if ok:
            assert templated[row].tolist() == greedy[row, :templated.shape[1]].tolist()
    results = advisor.advise_batch(items)
    assert all(result.action is not None for result in results)
    generic = HuggingFaceAdvisor(processor=advisor.processor, model=advisor.model, max_new_tokens=16,
                                 templated_decoding=False)
    generic.load()
    assert generic.decoder is None
    for ok, fast, slow in zip(formed, results, generic.advise_batch(items)):
        if ok:
            assert fast.text == slow.text and fast.action == slow.action


def test_templated_decoding_switch(init_model, tiny_llava):
    assert loaded(init_model, templated_decoding=False).decoder is None
    assert loaded(init_model, templated_decoding=True).decoder is not None
    short = HuggingFaceAdvisor(model_path=str(init_model), max_new_tokens=8)
    short.load()
    assert short.decoder is None  # an 11-token answer does not fit: generate, as asked
    processor, model = tiny_llava
    refused = HuggingFaceAdvisor(processor=processor, model=model, templated_decoding=True)
    with pytest.raises(ValueError, match="templated_decoding=true"):
        refused.load()
    with pytest.raises(ValueError, match="templated_decoding must be auto, true or false"):
        HuggingFaceAdvisor(model_path="x", templated_decoding="sometimes")
