"""The frame order of each fine-tuning epoch: a plain permutation, or junction frames drawn more often.

Junction commands (turn left, turn right, go straight at the intersection) are about 11 % of the
expert's frames, and the reward is weakest there. ``balanced_epoch_order`` draws an epoch's
frames with replacement so that junction frames make up a chosen share; within each side of the
split every frame is equally likely, so the action frequencies within a context, and with them
the prior a logit-adjusted model is a residual to, do not change.

Both orders are functions of the seed and the epoch, so a resumed run replays its batches.
"""

from __future__ import annotations

import numpy as np

JUNCTION_COMMAND_ROWS = (0, 1, 2)  # rows of COMMAND_PHRASES: turn left / right / go straight at the intersection


def is_junction(command_rows: np.ndarray) -> np.ndarray:
    """``[N]`` bool: the frame's command is one at an intersection."""
    return np.isin(command_rows, JUNCTION_COMMAND_ROWS)


def epoch_order(num_frames: int, seed: int, epoch: int) -> np.ndarray:
    """The frame order of an epoch: every frame once."""
    return np.random.default_rng([seed, epoch]).permutation(num_frames)


def balanced_epoch_order(junction: np.ndarray, share: float, seed: int, epoch: int) -> np.ndarray:
    """``len(junction)`` frame indices drawn with replacement, a ``share`` of them junction frames.

    Raises:
        ValueError: ``share`` outside (0, 1), or no junction (or no other) frames to draw from.
    """
    if not 0.0 < share < 1.0:
        raise ValueError(f"--junction-share must be in (0, 1), got {share}")
    junction = np.asarray(junction, dtype=bool)
    at_junction = int(junction.sum())
    if at_junction == 0 or at_junction == len(junction):
        raise ValueError(
            f"--junction-share {share}: the training frames hold {at_junction} junction frame(s) of "
            f"{len(junction)}; balancing needs both kinds"
        )
    weights = np.where(junction, share / at_junction, (1.0 - share) / (len(junction) - at_junction))
    rng = np.random.default_rng([seed, epoch])
    return rng.choice(len(junction), size=len(junction), replace=True, p=weights / weights.sum())
