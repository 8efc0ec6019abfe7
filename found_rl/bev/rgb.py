"""The colour picture of a BEV (ARCHITECTURE §4), for the VLM, CLIP and videos.

Colours and history tinting follow Roach's ``chauffeurnet`` renderer: older frames are tinted
towards white by ``(newest - i) * 0.2``.
"""

from __future__ import annotations

import numpy as np

from found_rl.bev.config import MARKING_CHANNEL, ROAD_CHANNEL, ROUTE_CHANNEL, BevConfig

ROAD_RGB = (46, 52, 54)
ROUTE_RGB = (136, 138, 133)
SOLID_MARKING_RGB = (255, 0, 255)
BROKEN_MARKING_RGB = (255, 140, 255)
GREEN_RGB = (0, 255, 0)
YELLOW_RGB = (255, 255, 0)
RED_RGB = (255, 0, 0)
STOP_SIGN_RGB = (160, 160, 0)
VEHICLE_RGB = (0, 0, 255)
WALKER_RGB = (0, 255, 255)
EGO_RGB = (255, 255, 255)

_TINT_PER_FRAME = 0.2


def tint(rgb: tuple[int, int, int], factor: float) -> np.ndarray:
    """Move a colour ``factor`` of the way to white."""
    colour = np.asarray(rgb, dtype=np.float64)
    return np.round(colour + (255.0 - colour) * factor).astype(np.uint8)


def masks_to_rgb(
    masks: np.ndarray,
    config: BevConfig,
    stop_sign_masks: np.ndarray | None = None,
    ego_mask: np.ndarray | None = None,
) -> np.ndarray:
    """Paint full-resolution masks as a ``(H, W, 3)`` uint8 RGB image (pure).

    Args:
        masks: ``(C, H, W)`` uint8 channels laid out as ``config`` says.
        config: the channel layout and values.
        stop_sign_masks: ``(T, H, W)`` bool, stop-sign pixels per history frame (their channel
            value equals red's, so the channels alone cannot tell them apart).
        ego_mask: ``(H, W)`` bool, the ego box.
    """
    _, height, width = masks.shape
    image = np.zeros((height, width, 3), np.uint8)
    image[masks[ROAD_CHANNEL] > 0] = ROAD_RGB
    image[masks[ROUTE_CHANNEL] > 0] = ROUTE_RGB
    lanes = masks[MARKING_CHANNEL]
    image[lanes == config.solid_marking_value] = SOLID_MARKING_RGB
    if config.broken_marking_value != config.solid_marking_value:
        image[lanes == config.broken_marking_value] = BROKEN_MARKING_RGB

    newest = config.history_frames - 1
    for frame, channel in enumerate(config.light_channels):
        factor = (newest - frame) * _TINT_PER_FRAME
        lights = masks[channel]
        for value, rgb in (
            (config.green_value, GREEN_RGB),
            (config.yellow_value, YELLOW_RGB),
            (config.red_value, RED_RGB),
        ):
            image[lights == value] = tint(rgb, factor)
        if stop_sign_masks is not None:
            image[stop_sign_masks[frame]] = tint(STOP_SIGN_RGB, factor)
    for frame, channel in enumerate(config.vehicle_channels):
        image[masks[channel] > 0] = tint(VEHICLE_RGB, (newest - frame) * _TINT_PER_FRAME)
    for frame, channel in enumerate(config.walker_channels):
        image[masks[channel] > 0] = tint(WALKER_RGB, (newest - frame) * _TINT_PER_FRAME)
    if ego_mask is not None:
        image[ego_mask] = EGO_RGB
    return image
