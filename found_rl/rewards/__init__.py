"""Reward functions: pure functions of a :class:`StepContext`, chosen by name.

``valeo`` is Roach's dense shaping reward; ``carl`` is CaRL's route progress with soft
penalties. Both read only the step's snapshots, route progress, infractions and hazards.
"""

from __future__ import annotations

from collections.abc import Callable

from found_rl.rewards.carl import CarlConfig, carl_reward
from found_rl.rewards.context import Hazards, Reward, StepContext, reward_hazards
from found_rl.rewards.valeo import ValeoConfig, valeo_reward

RewardFn = Callable[[StepContext], Reward]

REWARDS: dict[str, RewardFn] = {"valeo": valeo_reward, "carl": carl_reward}
"""Reward functions by the name a scenario's ``reward`` field or the env's ``reward`` uses."""


def get_reward(name: str) -> RewardFn:
    """The reward function called ``name``.

    Raises:
        ValueError: unknown name.
    """
    if name not in REWARDS:
        raise ValueError(f"reward: unknown reward {name!r}; allowed: {', '.join(sorted(REWARDS))}")
    return REWARDS[name]


__all__ = [
    "REWARDS",
    "CarlConfig",
    "Hazards",
    "Reward",
    "RewardFn",
    "StepContext",
    "ValeoConfig",
    "carl_reward",
    "get_reward",
    "reward_hazards",
    "valeo_reward",
]
