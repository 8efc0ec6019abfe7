"""DrQ random-shift augmentation of the BEV (Kostrikov et al. 2020; Yarats et al. 2021)."""

from __future__ import annotations

import torch

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
