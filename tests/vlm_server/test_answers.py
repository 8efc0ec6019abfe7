import pytest

from vlm_server.answers import build_prompt, parse_answer


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ('{"throttle": 0.5, "steer": -0.02, "brake": 0.0}', (0.5, -0.02)),
        (
            '{"brake": 0.7, "steer": 0.1, "throttle": 0.0}',
            (-0.7, 0.1),
        ),  # key order does not matter
        ('Sure! {"Throttle": 0.3, "Steer": 0.2, "Brake": 0.1} done', (0.3, 0.2)),
        (
            "throttle: 0.9, steer = 0.4, brake: 0",
            (0.9, 0.4),
        ),  # not JSON: key-value fallback
        ('{"throttle": 0.5, "steer": 0.1, "brake": 0.0', (0.5, 0.1)),  # truncated JSON
        ('{"throttle": 2.0, "steer": -3, "brake": -1}', (1.0, -1.0)),  # clipped ranges
        ('{"throttle": "0.4", "steer": "0", "brake": "0"}', (0.4, 0.0)),
    ],
)
def test_answers_are_parsed_by_key_name(text, action):
    parsed = parse_answer(text)
    assert parsed.error is None
    assert parsed.action == pytest.approx(action)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I would slow down.",
        '{"throttle": 0.5, "steer": 0.1}',
        "0.5, 0.1, 0.0",
        '{"throttle": NaN, "steer": 0, "brake": 0}',
    ],
)
def test_unparseable_answers_are_errors_not_zero_actions(text):
    parsed = parse_answer(text)
    assert parsed.action is None and parsed.error


def test_prompt_names_speed_command_and_optional_target():
    prompt = build_prompt(1, 3.14159, {"target_ego_xy": [1.234, -0.5]})
    assert "Current speed: 3.1 m/s." in prompt
    assert 'Navigation command: "turn left at the intersection".' in prompt
    assert "Forward vector: (1.23, -0.50)." in prompt
    assert '{"throttle": float, "steer": float, "brake": float}' in prompt
    assert "Forward vector" not in build_prompt(-1, 0.0)
    assert "follow the current lane" in build_prompt(-1, 0.0)
