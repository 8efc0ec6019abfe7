"""Executors: where the clip environments run (in-process, subprocess workers, Ray actors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fast_sampler.executors.base import EnvFactory, Executor, ResetResult, StepResult
from fast_sampler.executors.inprocess import InProcessExecutor
from fast_sampler.executors.process import ProcessExecutor

EXECUTOR_KINDS = ("inprocess", "process", "ray")

__all__ = [
    "EXECUTOR_KINDS",
    "EnvFactory",
    "Executor",
    "InProcessExecutor",
    "ProcessExecutor",
    "ResetResult",
    "StepResult",
    "make_executor",
]


def make_executor(env_fns: Sequence[EnvFactory], kind: str = "process", **options: Any) -> Executor:
    """Build an executor by name: ``inprocess``, ``process`` or ``ray`` (needs the extra ``ray``)."""
    if kind == "inprocess":
        return InProcessExecutor(env_fns, **options)
    if kind == "process":
        return ProcessExecutor(env_fns, **options)
    if kind == "ray":
        from fast_sampler.executors.ray_actors import RayExecutor

        return RayExecutor(env_fns, **options)
    raise ValueError(f"kind: expected one of {EXECUTOR_KINDS}, got {kind!r}")
