"""The reward's hazard view."""

from __future__ import annotations

from found_rl.rewards import Hazards, reward_hazards
from tests.scenes import snapshot


def test_nothing_ahead_gives_empty_hazards():
    assert reward_hazards(snapshot(0, (0.0, 0.0)), None, None, None, []) == Hazards()
