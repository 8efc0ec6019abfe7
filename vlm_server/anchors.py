"""CLIP action anchors: the 720 captions and the alignment margin of METHOD §3 (pure math).

The caption grid is ``[6 commands, 4 speed bins, 30 actions]`` with the action index
``lon * 5 + lat`` (lon-major). Nothing here touches a model, so the definitions can be tested
and reused (e.g. to caption a fine-tuning set) without torch.
"""

from __future__ import annotations

import numpy as np

from vlm_server.actions import RoadOption, action_to_controls

TEMPLATE = "Command is to {cmd}. {spd}. Action behavior: The car is {lon} and {lat}."

# Index = RoadOption value - 1; VOID and unknown values use DEFAULT_COMMAND_INDEX.
COMMAND_PHRASES: tuple[str, ...] = (
    "turn left at the intersection",
    "turn right at the intersection",
    "go straight at the intersection",
    "follow the current lane",
    "change to the left lane",
    "change to the right lane",
)
DEFAULT_COMMAND_INDEX = 3

SPEED_PHRASES: tuple[str, ...] = (
    "The car is currently stopped",
    "The car is moving slowly",
    "The car is driving at a moderate speed",
    "The car is driving at a high speed",
)
SPEED_BIN_UPPER_MPS: tuple[float, ...] = (0.1, 2.0, 4.5)

LON_PHRASES: tuple[str, ...] = (
    "braking hard",
    "braking",
    "accelerating fast",
    "accelerating",
    "accelerating gently",
    "idling",
)
LAT_PHRASES: tuple[str, ...] = (
    "going straight",
    "turning right sharply",
    "turning right",
    "turning left sharply",
    "turning left",
)
NUM_ACTIONS = len(LON_PHRASES) * len(LAT_PHRASES)  # 30

# Neighbour lists (each class is its own neighbour too; see neighbour_mask()).
_LON_NEIGHBOURS: dict[int, tuple[int, ...]] = {
    0: (1,),
    1: (0,),
    2: (3,),
    3: (2, 4),
    4: (3,),
    5: (),
}
_LAT_NEIGHBOURS: dict[int, tuple[int, ...]] = {
    0: (),
    1: (2,),
    2: (1,),
    3: (4,),
    4: (3,),
}

BONUS_SCALE = 0.25
VARIANCE_EPS = 1e-8


def command_index(command: int) -> int:
    """Row of the anchor grid for a RoadOption value (VOID and unknown: follow the lane)."""
    if (
        command in (option.value for option in RoadOption)
        and command != RoadOption.VOID
    ):
        return int(command) - 1
    return DEFAULT_COMMAND_INDEX


def speed_bin(speed_mps: float) -> int:
    """Speed bin of the forward speed: stopped, slowly, moderate, high."""
    for index, upper in enumerate(SPEED_BIN_UPPER_MPS):
        if speed_mps < upper:
            return index
    return len(SPEED_BIN_UPPER_MPS)


def action_class(acc: float, steer: float) -> tuple[int, int]:
    """Discretise an executed ``(acc, steer)`` action into ``(lon, lat)`` class indices."""
    throttle, steer, brake = action_to_controls(acc, steer)
    if brake > 0.05:
        lon = 0 if brake > 0.5 else 1
    elif throttle > 0.05:
        lon = 2 if throttle > 0.8 else 3 if throttle > 0.3 else 4
    else:
        lon = 5
    if abs(steer) < 0.05:
        lat = 0
    elif steer > 0:
        lat = 1 if steer > 0.3 else 2
    else:
        lat = 3 if steer < -0.3 else 4
    return lon, lat


def action_index(acc: float, steer: float) -> int:
    """Index in ``[0, 30)`` of the executed action's anchor (lon-major)."""
    lon, lat = action_class(acc, steer)
    return lon * len(LAT_PHRASES) + lat


def anchor_captions() -> list[str]:
    """The 720 captions in ``[command, speed bin, action]`` row-major order."""
    return [
        TEMPLATE.format(cmd=cmd, spd=spd, lon=lon, lat=lat)
        for cmd in COMMAND_PHRASES
        for spd in SPEED_PHRASES
        for lon in LON_PHRASES
        for lat in LAT_PHRASES
    ]


def neighbour_mask() -> np.ndarray:
    """``[30, 30]`` bool; ``mask[a, j]`` is True when anchor j is in N(a) (a included)."""
    num_lat = len(LAT_PHRASES)
    mask = np.zeros((NUM_ACTIONS, NUM_ACTIONS), dtype=bool)
    for a in range(NUM_ACTIONS):
        lon_a, lat_a = divmod(a, num_lat)
        lons = {lon_a, *_LON_NEIGHBOURS[lon_a]}
        lats = {lat_a, *_LAT_NEIGHBOURS[lat_a]}
        for lon in lons:
            for lat in lats:
                mask[a, lon * num_lat + lat] = True
    return mask


NEIGHBOUR_MASK = neighbour_mask()


def alignment_margin(probs: np.ndarray, action_indices: np.ndarray) -> np.ndarray:
    """``m = max(0, p_a - max_{j not in N(a)} p_j)`` per row.

    Args:
        probs: ``[B, 30]`` softmax probabilities over the 30 action anchors.
        action_indices: ``[B]`` int, the executed action's anchor per row.

    Returns:
        ``[B]`` float64 margins in ``[0, 1]``.
    """
    probs = np.asarray(probs, dtype=np.float64)
    action_indices = np.asarray(action_indices, dtype=np.int64)
    rows = np.arange(len(action_indices))
    p_a = probs[rows, action_indices]
    outside = np.where(NEIGHBOUR_MASK[action_indices], -np.inf, probs)
    return np.maximum(0.0, p_a - outside.max(axis=1))


def normalised_bonus(margin: float, mean: float, var: float) -> float:
    """``b = 0.25 * clip((m - mu) / sqrt(var + 1e-8), -1, 1)``."""
    return float(normalised_bonuses(margin, mean, var))


def normalised_bonuses(margins: np.ndarray | float, mean: np.ndarray | float, var: np.ndarray | float) -> np.ndarray:
    """``normalised_bonus`` of many margins at once (``mean`` and ``var`` broadcast against them)."""
    z = (np.asarray(margins, dtype=np.float64) - mean) / np.sqrt(np.asarray(var, dtype=np.float64) + VARIANCE_EPS)
    return BONUS_SCALE * np.clip(z, -1.0, 1.0)
