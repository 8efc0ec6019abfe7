"""FAST: lock-step parallel sampling with virtual continuation and mask-weighted losses; independent of found_rl.

Samplers (:mod:`fast_sampler.sampler`) step N clips of any gymnasium env in lock-step through an
executor (:mod:`fast_sampler.executors`); SMPO's masked losses live in :mod:`fast_sampler.smpo`
(imported on first use, as it needs torch). METHOD.md §4 defines the semantics.

On-policy use (PPO)::

    executor = ProcessExecutor([make_env] * 8)  # one env per worker process
    with FastSampler(executor, policy, rho=0.5, horizon=1000, seed=0) as sampler:
        rollout = sampler.collect(128)          # (128, 8) arrays with valid/terminated/truncated
    # policy(obs) returned (actions, {"values": ..., "log_probs": ...}); V(next_obs) bootstraps
    advantages, returns = masked_gae(rewards, values, next_values, terminated, truncated, valid, 0.99, 0.95)
    loss = masked_mean(per_transition_loss, valid)

Off-policy use (SAC)::

    for transition in sampler.transitions(1000):   # padding is never yielded
        replay.add(transition)                      # transition.step_id keys advisor labels

Overlapping acting and learning (``step()`` is ``step_async()`` then ``step_wait()``)::

    sampler.step_async()                            # resets, policy(o_t), actions sent to the workers
    learner.update(replay.sample(256))              # runs while the workers step
    for transition in sampler.step_wait().transitions():
        replay.add(transition)
"""

from __future__ import annotations

from typing import Any

from fast_sampler.errors import ClipError, EnvFactoryError, EnvLostError, WorkerCrashedError, WorkerTimeoutError
from fast_sampler.executors import Executor, InProcessExecutor, ProcessExecutor, make_executor
from fast_sampler.rollout import Rollout, StepBatch, StepId, Transition
from fast_sampler.rules import AdaptiveRho, ClipEndRule
from fast_sampler.sampler import (
    FastSampler,
    GlobalResetSampler,
    LockstepSampler,
    PerClipResetSampler,
    SamplerStats,
    SingleClipSampler,
)
from fast_sampler.synthetic import CarlaLikeEnv

__all__ = [
    "AdaptiveRho",
    "CarlaLikeEnv",
    "ClipEndRule",
    "ClipError",
    "EnvFactoryError",
    "EnvLostError",
    "Executor",
    "FastSampler",
    "GlobalResetSampler",
    "InProcessExecutor",
    "LockstepSampler",
    "PerClipResetSampler",
    "ProcessExecutor",
    "Rollout",
    "SamplerStats",
    "SingleClipSampler",
    "StepBatch",
    "StepId",
    "Transition",
    "WorkerCrashedError",
    "WorkerTimeoutError",
    "make_executor",
    "masked_gae",
    "masked_mean",
    "masked_normalize",
]

_SMPO_NAMES = {"masked_gae", "masked_mean", "masked_normalize"}


def __getattr__(name: str) -> Any:
    if name in _SMPO_NAMES:
        from fast_sampler import smpo

        return getattr(smpo, name)
    raise AttributeError(f"module 'fast_sampler' has no attribute {name!r}")
