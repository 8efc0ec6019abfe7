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

    Layers are painted in Roach's order (later ones on top) as indices into a small palette,
    and the palette is looked up once at the end.

    Args:
        masks: ``(C, H, W)`` uint8 channels laid out as ``config`` says.
        config: the channel layout and values.
        stop_sign_masks: ``(T, H, W)`` bool, stop-sign pixels per history frame (their channel
            value equals red's, so the channels alone cannot tell them apart).
        ego_mask: ``(H, W)`` bool, the ego box.
    """
    _, height, width = masks.shape
    codes = np.zeros((height, width), np.uint8)
    palette: list[np.ndarray] = [np.zeros(3, np.uint8)]

    def paint(where: np.ndarray, rgb: tuple[int, int, int] | np.ndarray) -> None:
        palette.append(np.asarray(rgb, dtype=np.uint8))
        np.copyto(codes, len(palette) - 1, where=where)

    paint(masks[ROAD_CHANNEL] > 0, ROAD_RGB)
    paint(masks[ROUTE_CHANNEL] > 0, ROUTE_RGB)
    lanes = masks[MARKING_CHANNEL]
    paint(lanes == config.solid_marking_value, SOLID_MARKING_RGB)
    if config.broken_marking_value != config.solid_marking_value:
        paint(lanes == config.broken_marking_value, BROKEN_MARKING_RGB)

    newest = config.history_frames - 1
    light_colours = ((config.green_value, GREEN_RGB), (config.yellow_value, YELLOW_RGB), (config.red_value, RED_RGB))
    for frame, channel in enumerate(config.light_channels):
        factor = (newest - frame) * _TINT_PER_FRAME
        lights = masks[channel]
        if not lights.any():
            continue
        for value, rgb in light_colours:
            paint(lights == value, tint(rgb, factor))
        if stop_sign_masks is not None:
            paint(stop_sign_masks[frame], tint(STOP_SIGN_RGB, factor))
    for channels, rgb in ((config.vehicle_channels, VEHICLE_RGB), (config.walker_channels, WALKER_RGB)):
        for frame, channel in enumerate(channels):
            paint(masks[channel] > 0, tint(rgb, (newest - frame) * _TINT_PER_FRAME))
    if ego_mask is not None:
        paint(ego_mask, EGO_RGB)
    return np.stack(palette)[codes]
