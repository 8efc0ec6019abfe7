"""The reward's hazard view: its shortcuts against the plain numpy forms."""

from __future__ import annotations

import numpy as np

from found_rl.rewards import Hazards, reward_hazards
from found_rl.rewards.context import _line_middle
from found_rl.testing import snapshot


def test_line_middle_is_numpys_mean_bit_for_bit():
    rng = np.random.default_rng(0)
    segments = rng.normal(0.0, 300.0, (500, 2, 2))
    for index in range(len(segments)):
        assert _line_middle(segments, index).tobytes() == segments[index].mean(axis=0).tobytes()
    as_float32 = segments.astype(np.float32)
    assert _line_middle(as_float32, 3).tobytes() == as_float32[3].mean(axis=0).tobytes()


def test_nothing_ahead_gives_empty_hazards():
    assert reward_hazards(snapshot(0, (0.0, 0.0)), None, None, None, []) == Hazards()

