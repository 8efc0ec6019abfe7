"""The from-scratch advisor's tokenizer: every prompt and answer is short, loses nothing, and any text encodes."""

import itertools
import string

import pytest

from tests.optional import require

require("transformers")  # optional extra: found-rl[hf]
# ruff: noqa: E402 (the imports below come after the check, as after pytest.importorskip)

from found_rl.dataset.text import chat_answer
from found_rl.vlm.advisor_tokenizer import CHAT_TEMPLATE, advisor_tokenizer, fixed_phrases
from vlm_server.actions import RoadOption
from vlm_server.anchors import COMMAND_PHRASES
from vlm_server.answers import build_prompt, parse_answer


@pytest.fixture(scope="module")
def tokenizer():
    return advisor_tokenizer()


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False).input_ids


@pytest.mark.parametrize("command", [option.value for option in RoadOption])
@pytest.mark.parametrize(
    ("speed", "target"), [(0.0, None), (7.94, (9.64, -0.24)), (12.3, (-3.5, 27.05)), (131.0, (123.45, -0.05))]
)
def test_every_server_prompt_is_a_dozen_known_tokens_and_decodes_to_itself(tokenizer, command, speed, target):
    state = None if target is None else {"target_ego_xy": list(target)}
    prompt = build_prompt(command, speed, state)
    ids = encode(tokenizer, prompt)
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == prompt
    assert len(ids) <= (4 if target is None else 12) + 2  # 2 more for numbers beyond two integer digits


@pytest.mark.parametrize(("acc", "steer"), [(0.351, -0.12), (-1.0, 1.0), (0.0, -0.001), (0.07, 0.3)])
def test_an_answer_is_ten_tokens_that_parse_back_to_the_action(tokenizer, acc, steer):
    answer = chat_answer(acc, steer)
    ids = encode(tokenizer, answer)
    assert len(ids) == 10 and tokenizer.unk_token_id not in ids
    decoded = tokenizer.decode(ids)
    assert decoded == answer
    assert parse_answer(decoded).action == pytest.approx((round(acc, 2), round(steer, 2)), abs=0.006)


def test_any_ascii_text_round_trips_and_other_characters_are_unknown(tokenizer):
    text = string.printable + '{"steer" : 1e-5, "x": [1, 22.333]}'
    assert tokenizer.decode(encode(tokenizer, text)) == text
    assert encode(tokenizer, "é") == [tokenizer.unk_token_id]


def test_fixed_phrases_cover_each_command_and_the_answer_keys():
    phrases = fixed_phrases()
    for command in COMMAND_PHRASES:
        assert sum(f'"{command}"' in phrase for phrase in phrases) == 2  # with and without the target line
    assert {'{"throttle": ', ', "steer": ', ', "brake": ', "}"} <= set(phrases)
    assert all(len(a) >= len(b) for a, b in itertools.pairwise(phrases))  # the regex tries the longest first


def test_chat_turn_puts_the_answer_after_the_assistant_marker(tokenizer):
    tokenizer.chat_template = CHAT_TEMPLATE
    user = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]}
    assert tokenizer.apply_chat_template([user], add_generation_prompt=True, tokenize=False) == (
        "<|user|><image>hi<|assistant|>"
    )
    both = [user, {"role": "assistant", "content": "ok"}]
    text = tokenizer.apply_chat_template(both, tokenize=False)
    assert text == "<|user|><image>hi<|assistant|>ok</s>"
    tokens = tokenizer.convert_ids_to_tokens(encode(tokenizer, text))
    assert tokens[:2] == ["<|user|>", "<image>"] and tokens[-1] == "</s>"
