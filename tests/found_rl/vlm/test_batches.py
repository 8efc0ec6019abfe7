"""Training batches: the prompt part is the server's input for the same frame; labels cover the answer only."""

import pytest
import torch

from found_rl.vlm.batches import IGNORE_INDEX, count_tokens, encode_batch
from found_rl.vlm.examples import load_chat_examples
from vlm_server.backends.base import AdviseItem
from vlm_server.backends.hf_vlm import HuggingFaceAdvisor


@pytest.fixture(scope="module")
def advisor(tiny_vlm_dir):
    advisor = HuggingFaceAdvisor(model_path=str(tiny_vlm_dir))
    advisor.load()
    return advisor


def server_inputs(advisor, example, monkeypatch) -> dict:
    """What the server's HF backend hands ``generate`` for ``example``'s frame (as an advice request)."""
    captured = {}

    def generate(**kwargs):
        captured.update(kwargs)
        return kwargs["input_ids"]

    monkeypatch.setattr(advisor.model, "generate", generate)
    item = AdviseItem("x", example.image(), example.command, example.speed_mps, example.state)
    advisor.advise_batch([item])
    return captured


def test_one_samples_training_prompt_equals_the_servers_input_for_the_same_frame(
    expert_data, advisor, monkeypatch
):
    examples = load_chat_examples(expert_data)
    batch = encode_batch(advisor.processor, examples[:3])  # rows of different lengths
    assert advisor.processor.tokenizer.padding_side == "left"  # training leaves the server's setting alone
    for row, example in enumerate(examples[:3]):
        served = server_inputs(advisor, example, monkeypatch)
        prompt_positions = (batch["labels"][row] == IGNORE_INDEX) & (batch["attention_mask"][row] == 1)
        train_prompt = batch["input_ids"][row][prompt_positions]
        assert torch.equal(train_prompt, served["input_ids"][0])
        # the server resizes and normalises with torch, checked against the processor at load
        torch.testing.assert_close(batch["pixel_values"][row], served["pixel_values"][0], atol=1e-5, rtol=0)
        # the prompt part comes first; the answer follows it directly
        length = len(train_prompt)
        assert bool(prompt_positions[:length].all()) and not bool(prompt_positions[length:].any())


def test_labels_are_the_answer_and_end_token_only(expert_data, advisor):
    examples = load_chat_examples(expert_data)[:4]
    batch = encode_batch(advisor.processor, examples)
    tokenizer = advisor.processor.tokenizer
    for row, example in enumerate(examples):
        labelled = batch["labels"][row][batch["labels"][row] != IGNORE_INDEX].tolist()
        assert labelled[-1] == tokenizer.eos_token_id
        assert tokenizer.decode(labelled[:-1]) == example.answer
        # the labelled tokens are the input tokens at the same positions (the model shifts them)
        positions = batch["labels"][row] != IGNORE_INDEX
        assert batch["input_ids"][row][positions].tolist() == labelled
        assert bool(batch["attention_mask"][row][positions].all())
    padding = batch["attention_mask"] == 0
    assert bool((batch["labels"][padding] == IGNORE_INDEX).all())
    assert bool((batch["input_ids"][padding] == tokenizer.pad_token_id).all())
    tokens, answer_tokens = count_tokens(batch)
    assert answer_tokens == sum(len(tokenizer(e.answer, add_special_tokens=False).input_ids) + 1 for e in examples)
    assert tokens == int(batch["attention_mask"].sum())


def test_a_row_does_not_depend_on_its_batch(expert_data, advisor):
    examples = load_chat_examples(expert_data)[:3]
    together = encode_batch(advisor.processor, examples)
    for row, example in enumerate(examples):
        alone = encode_batch(advisor.processor, [example])
        length = alone["input_ids"].shape[1]
        assert torch.equal(together["input_ids"][row, :length], alone["input_ids"][0])
        assert torch.equal(together["labels"][row, :length], alone["labels"][0])
        assert int(together["attention_mask"][row].sum()) == length
