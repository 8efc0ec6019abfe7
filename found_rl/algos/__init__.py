"""Learners (SAC, DrQ-v2, PPO) and the pure guidance terms they add (VMR, AWAG, CLIP bonus, advisor BC)."""

from __future__ import annotations

from typing import Any

from found_rl.algos.drqv2 import DrQV2, DrQV2Config
from found_rl.algos.guidance import (
    GuidanceTerm,
    awag_loss,
    awag_weights,
    clip_bonus_rewards,
    vmr_loss,
)
from found_rl.algos.ppo import PPO, PpoConfig
from found_rl.algos.sac import SAC, SacConfig

ALGORITHMS = ("sac", "ppo", "drqv2")


def parse_algorithm(name: str) -> str:
    """Check an algorithm name.

    Raises:
        ValueError: naming the unknown algorithm and the allowed ones.
    """
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm: unknown algorithm {name!r}; allowed: {', '.join(ALGORITHMS)}")
    return name


CONFIGS: dict[str, type[SacConfig] | type[PpoConfig] | type[DrQV2Config]] = {
    "sac": SacConfig,
    "ppo": PpoConfig,
    "drqv2": DrQV2Config,
}


def make_config(name: str, **overrides: Any) -> SacConfig | PpoConfig | DrQV2Config:
    """The hyper-parameter dataclass of algorithm ``name`` with ``overrides`` applied."""
    return CONFIGS[parse_algorithm(name)](**overrides)


__all__ = [
    "ALGORITHMS",
    "CONFIGS",
    "PPO",
    "SAC",
    "DrQV2",
    "DrQV2Config",
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
