"""Transition storage: label-aware replay (off-policy) and masked rollouts (on-policy)."""

from found_rl.storage.replay import ReplayBuffer, ReplaySamples, StepId
from found_rl.storage.rollout import RolloutSamples, RolloutStorage

__all__ = [
    "ReplayBuffer",
    "ReplaySamples",
    "RolloutSamples",
    "RolloutStorage",
    "StepId",
]
