"""Learners (SAC, PPO) and the pure guidance terms they add (VMR, AWAG, CLIP bonus)."""

from __future__ import annotations

from typing import Any

from found_rl.algos.guidance import (
    GuidanceTerm,
    awag_loss,
    awag_weights,
    clip_bonus_rewards,
    vmr_loss,
)
from found_rl.algos.ppo import PPO, PpoConfig
from found_rl.algos.sac import SAC, SacConfig

ALGORITHMS = ("sac", "ppo")


def parse_algorithm(name: str) -> str:
    """Check an algorithm name.

    Raises:
        ValueError: naming the unknown algorithm and the allowed ones.
    """
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm: unknown algorithm {name!r}; allowed: {', '.join(ALGORITHMS)}")
    return name


def make_config(name: str, **overrides: Any) -> SacConfig | PpoConfig:
    """The hyper-parameter dataclass of algorithm ``name`` with ``overrides`` applied."""
    return {"sac": SacConfig, "ppo": PpoConfig}[parse_algorithm(name)](**overrides)


__all__ = [
    "ALGORITHMS",
    "PPO",
    "SAC",
    "GuidanceTerm",
    "PpoConfig",
    "SacConfig",
    "awag_loss",
    "awag_weights",
    "clip_bonus_rewards",
    "make_config",
    "parse_algorithm",
    "vmr_loss",
]
