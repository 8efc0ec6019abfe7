"""Learners (SAC, DrQ-v2, PPO) and the pure guidance terms they add (VMR, AWAG, CLIP bonus, advisor BC).

Names load on first use (PEP 562), so ``found_rl.algos.registry`` can be read without torch.
Which learners exist is :data:`found_rl.algos.registry.LEARNERS`.
"""

from __future__ import annotations

from typing import Any

from found_rl.algos.registry import LEARNERS, learner_entry
from found_rl.lazy import lazy_attributes

ALGORITHMS = tuple(LEARNERS)

__getattr__, __dir__ = lazy_attributes(__name__, {
    "SAC": "sac",
    "SacConfig": "sac",
    "DrQV2": "drqv2",
    "DrQV2Config": "drqv2",
    "PPO": "ppo",
    "PpoConfig": "ppo",
    "GuidanceTerm": "guidance",
    "awag_loss": "guidance",
    "awag_weights": "guidance",
    "clip_bonus_rewards": "guidance",
    "vmr_loss": "guidance",
})


def parse_algorithm(name: str) -> str:
    """Check a learner name against the registry.

    Raises:
        ValueError: naming the unknown algorithm and the allowed ones.
    """
    try:
        return learner_entry(name).name
    except ValueError as exc:
        raise ValueError(f"algorithm: {exc}") from None


def make_config(name: str, **overrides: Any) -> Any:
    """The hyper-parameter dataclass of learner ``name`` with ``overrides`` applied."""
    return learner_entry(parse_algorithm(name)).config_class(**overrides)


__all__ = [
    "ALGORITHMS",
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
