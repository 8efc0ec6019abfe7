"""FAST: lock-step parallel sampling with virtual continuation and mask-weighted losses; independent of found_rl.

Samplers (:mod:`fast_sampler.sampler`) step N clips of any gymnasium env in lock-step through an
executor (:mod:`fast_sampler.executors`); SMPO's masked losses live in :mod:`fast_sampler.smpo`
(imported on first use, as it needs torch). METHOD.md §4 defines the semantics.
"""

from __future__ import annotations

from typing import Any

from fast_sampler.errors import ClipError, EnvFactoryError, WorkerCrashedError, WorkerTimeoutError
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
