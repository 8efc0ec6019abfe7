"""BEV augmentation: DrQ's random shift (Kostrikov et al. 2020; Yarats et al. 2021) and the ±10°
random rotation Found-RL's DrQ-v2 alternates with it."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from found_rl.models.observation import TensorObs


def random_shift(bev: torch.Tensor, pad_px: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Shift each image by an integer offset in [−pad, pad] px, repeating the border pixels.

    Equivalent to replicate-padding by ``pad_px`` and cropping back at a random position, done by
    clamped indexing so uint8 images stay uint8 and nothing is interpolated.

    Args:
        bev: ``(B, C, H, W)`` images of any dtype.
        pad_px: largest shift in pixels (DrQ uses 4 for 84 px images).
        generator: source of the offsets.

    Returns:
        A tensor like ``bev``.
    """
    if pad_px <= 0:
        return bev
    batch, _, height, width = bev.shape
    device = bev.device
    offsets = torch.randint(-pad_px, pad_px + 1, (batch, 2), generator=generator).to(device)
    rows = (torch.arange(height, device=device)[None, :] + offsets[:, :1]).clamp(0, height - 1)
    cols = (torch.arange(width, device=device)[None, :] + offsets[:, 1:]).clamp(0, width - 1)
    batch_index = torch.arange(batch, device=device)[:, None, None]
    shifted = bev.permute(0, 2, 3, 1)[batch_index, rows[:, :, None], cols[:, None, :]]  # (B, H, W, C)
    return shifted.permute(0, 3, 1, 2).contiguous()


def shift_observation(obs: TensorObs, pad_px: int, generator: torch.Generator | None = None) -> TensorObs:
    """``random_shift`` applied to the BEV of a driving observation; vectors pass through."""
    if not isinstance(obs, dict) or pad_px <= 0:
        return obs
    return {**obs, "bev": random_shift(obs["bev"], pad_px, generator)}


def rotate(bev: torch.Tensor, angles_deg: torch.Tensor) -> torch.Tensor:
    """Rotate each image about its centre by its angle, counter-clockwise as displayed (row 0 on
    top; 90° equals ``torch.rot90(k=1)``), nearest pixel, zeros outside; the dtype is kept.

    Args:
        bev: ``(B, C, H, W)`` images.
        angles_deg: ``(B,)`` angles in degrees.
    """
    radians = angles_deg.to(torch.float32) * (math.pi / 180.0)
    cos, sin = torch.cos(radians), torch.sin(radians)
    zeros = torch.zeros_like(cos)
    # affine_grid maps output to input coordinates: the inverse rotation.
    theta = torch.stack([torch.stack([cos, -sin, zeros], 1), torch.stack([sin, cos, zeros], 1)], 1).to(bev.device)
    grid = F.affine_grid(theta, list(bev.shape), align_corners=False)
    rotated = F.grid_sample(bev.to(torch.float32), grid, mode="nearest", padding_mode="zeros", align_corners=False)
    return rotated.round().to(bev.dtype) if not bev.dtype.is_floating_point else rotated.to(bev.dtype)


def random_rotate(bev: torch.Tensor, max_deg: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """``rotate`` by angles uniform in [−max_deg, max_deg], one per image."""
    if max_deg <= 0:
        return bev
    angles = (torch.rand(bev.shape[0], generator=generator) * 2.0 - 1.0) * max_deg
    return rotate(bev, angles)


def augment_observation(
    obs: TensorObs, pad_px: int, rotate_deg: float = 0.0, generator: torch.Generator | None = None
) -> TensorObs:
    """Found-RL's DrQ-v2 augmentation: a random shift or, with probability ½ when both are on, a
    random rotation of the whole batch's BEVs; vector observations pass through."""
    if not isinstance(obs, dict) or (pad_px <= 0 and rotate_deg <= 0):
        return obs
    use_rotation = rotate_deg > 0 and (pad_px <= 0 or bool(torch.rand((), generator=generator) < 0.5))
    if use_rotation:
        return {**obs, "bev": random_rotate(obs["bev"], rotate_deg, generator)}
    return shift_observation(obs, pad_px, generator)
