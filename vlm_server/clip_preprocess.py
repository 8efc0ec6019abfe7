"""The pixels a CLIP model sees: area resize to the model's side, then mean/std normalisation.

Fine-tuning (``found_rl.clip``) and serving (``vlm_server.backends.clip``) both call these two
functions, so a served model sees exactly the pixels it was trained on: clients send the RGB
BEV at its native size (192 px) and the server resizes it the same way the dataset loader did.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def resize_area(images: np.ndarray | torch.Tensor, side: int) -> torch.Tensor:
    """``[B, side, side, 3]`` uint8: ``[B, H, W, 3]`` uint8 images averaged over pixel areas.

    Stacks of frames, ``[B, T, H, W, 3]``, are resized frame by frame (``[B, T, side, side, 3]``).

    Area averaging (``adaptive_avg_pool2d``) is exact for integer factors (192 -> 96 averages 2 x 2
    blocks) and well defined for any other; the result is rounded back to uint8, so resizing a
    dataset once and resizing each served request give the same bytes. Images already at
    ``side`` are returned unchanged.
    """
    pixels = torch.as_tensor(images)
    if pixels.ndim == 5 and pixels.dtype == torch.uint8:
        batch, frames = pixels.shape[:2]
        flat = resize_area(pixels.reshape(batch * frames, *pixels.shape[2:]), side)
        return flat.reshape(batch, frames, side, side, 3)
    if pixels.ndim != 4 or pixels.shape[-1] != 3 or pixels.dtype != torch.uint8:
        raise ValueError(
            f"images: expected [B, H, W, 3] or [B, T, H, W, 3] uint8, got {tuple(pixels.shape)} {pixels.dtype}"
        )
    if pixels.shape[1] == side and pixels.shape[2] == side:
        return pixels
    chw = pixels.permute(0, 3, 1, 2).float()
    pooled = F.adaptive_avg_pool2d(chw, (side, side))
    return pooled.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()


def normalise(
    images: torch.Tensor, mean: Sequence[float], std: Sequence[float], dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """``[B, 3, H, W]`` model input from ``[B, H, W, 3]`` uint8 images (on their device).

    A stack ``[B, T, H, W, 3]`` becomes ``[B, 3 T, H, W]``: the frames' channels in stack order
    (oldest first), each normalised alike.
    """
    if images.ndim == 5:
        batch, frames, height, width, _ = images.shape
        flat = normalise(images.reshape(batch * frames, height, width, 3), mean, std, dtype)
        return flat.reshape(batch, frames * 3, height, width)
    device = images.device
    mean_t = torch.tensor(mean, device=device, dtype=torch.float32).view(1, 3, 1, 1)
    std_t = torch.tensor(std, device=device, dtype=torch.float32).view(1, 3, 1, 1)
    pixels = images.permute(0, 3, 1, 2).float().div_(255.0)
    return ((pixels - mean_t) / std_t).to(dtype)
