"""Learners (SAC, DrQ-v2, PPO) and the pure guidance terms they add (VMR, AWAG, CLIP bonus, advisor BC).

Names load on first use (PEP 562), so ``found_rl.algos.registry`` can be read without torch.
Which learners exist is :data:`found_rl.algos.registry.LEARNERS`.
"""

from __future__ import annotations

import importlib
from typing import Any

from found_rl.algos.registry import LEARNERS, learner_entry

ALGORITHMS = tuple(LEARNERS)

_LAZY = {
    "SAC": "found_rl.algos.sac",
    "SacConfig": "found_rl.algos.sac",
    "DrQV2": "found_rl.algos.drqv2",
    "DrQV2Config": "found_rl.algos.drqv2",
    "PPO": "found_rl.algos.ppo",
    "PpoConfig": "found_rl.algos.ppo",
    "GuidanceTerm": "found_rl.algos.guidance",
    "awag_loss": "found_rl.algos.guidance",
    "awag_weights": "found_rl.algos.guidance",
    "clip_bonus_rewards": "found_rl.algos.guidance",
    "vmr_loss": "found_rl.algos.guidance",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'found_rl.algos' has no attribute {name!r}")


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
