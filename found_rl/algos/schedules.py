"""Coefficient schedules over global env steps t (METHOD §1–2). Pure functions of t."""

from __future__ import annotations

import math


def linear_decay(
    global_step: int,
    start_step: int,
    end_step: int,
    start_value: float = 1.0,
    end_value: float = 0.0,
) -> float:
    """``start_value`` until ``start_step``, linear to ``end_value`` at ``end_step``, constant after.

    Raises:
        ValueError: if ``end_step < start_step``.
    """
    if end_step < start_step:
        raise ValueError(f"linear_decay: end_step ({end_step}) must be >= start_step ({start_step})")
    if global_step <= start_step:
        return start_value
    if global_step >= end_step:
        return end_value
    fraction = (global_step - start_step) / (end_step - start_step)
    return start_value + fraction * (end_value - start_value)


def vmr_coefficient(global_step: int, start_step: int = 50_000, end_step: int = 150_000) -> float:
    """λ(t) of VMR: 1 for t ≤ 50k, linear to 0 at t = 150k, 0 after (METHOD §1)."""
    return linear_decay(global_step, start_step, end_step, 1.0, 0.0)


def drqv2_cosine(
    global_step: int,
    peak: float = 0.03,
    horizon_steps: int = 300_000,
    power: float = 0.7,
) -> float:
    """c(t) = peak · ½(1 + cos(π · min(t / horizon, 1)^power)): AWAG for a DrQ-v2-style actor (METHOD §2)."""
    if horizon_steps <= 0:
        raise ValueError(f"drqv2_cosine: horizon_steps must be > 0, got {horizon_steps}")
    progress = min(max(global_step, 0) / horizon_steps, 1.0) ** power
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))
