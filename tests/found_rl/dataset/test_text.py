"""Captions are exactly the server's CLIP anchors; chat answers map back to the action."""

import json

import pytest

from found_rl.actions import RoadOption
from found_rl.dataset import chat_answer, chat_prompt, clip_caption
from vlm_server.actions import controls_to_action
from vlm_server.anchors import anchor_captions


@pytest.mark.parametrize(
    ("command", "speed", "acc", "steer", "expected"),
    [
        (
            RoadOption.LEFT,
            0.0,
            0.9,
            -0.4,
            "Command is to turn left at the intersection. The car is currently stopped. "
            "Action behavior: The car is accelerating fast and turning left sharply.",
        ),
        (
            RoadOption.LANEFOLLOW,
            5.0,
            -0.3,
            0.0,
            "Command is to follow the current lane. The car is driving at a high speed. "
            "Action behavior: The car is braking and going straight.",
        ),
        (
            RoadOption.VOID,
            3.0,
            0.0,
            0.1,
            "Command is to follow the current lane. The car is driving at a moderate speed. "
            "Action behavior: The car is idling and turning right.",
        ),
    ],
)
def test_caption_hand_written_cases(command, speed, acc, steer, expected):
    assert clip_caption(command, speed, acc, steer) == expected


def test_every_caption_is_a_server_anchor():
    anchors = set(anchor_captions())
    for command in RoadOption:
        for speed in (0.0, 1.0, 3.0, 8.0):
            for acc in (-0.9, -0.2, 0.0, 0.1, 0.5, 0.95):
                for steer in (-0.5, -0.1, 0.0, 0.1, 0.5):
                    assert clip_caption(command, speed, acc, steer) in anchors


def test_chat_answer_maps_back_to_the_action():
    for acc, steer in ((0.55, -0.12), (-0.8, 0.3), (0.0, 0.0)):
        answer = json.loads(chat_answer(acc, steer))
        assert controls_to_action(**answer) == pytest.approx((acc, steer))


def test_prompt_carries_speed_target_and_command():
    prompt = chat_prompt(3.14159, (6.0, -1.25), RoadOption.RIGHT)
    assert prompt.startswith("<image>\n")
    assert "Current speed: 3.1 m/s." in prompt
    assert "Forward vector: (6.00, -1.25)." in prompt
    assert 'Navigation command: "turn right at the intersection".' in prompt
