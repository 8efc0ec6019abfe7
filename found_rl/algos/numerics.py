"""Numerical guards shared by the learners."""

from __future__ import annotations

import torch


def ensure_finite(values: dict[str, torch.Tensor], global_step: int) -> None:
    """Stop the run at the first non-finite loss term, naming it.

    Raises:
        FloatingPointError: if a term is NaN or infinite.
    """
    for name, value in values.items():
        if not torch.isfinite(value).all():
            raise FloatingPointError(
                f"{name} is {value.item() if value.numel() == 1 else value} at global step {global_step}; "
                "stopping (check rewards, learning rates and labels)"
            )
