"""Fixtures shared by the fast_sampler tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from fast_sampler import Executor, LockstepSampler, Rollout, StepBatch
from fast_sampler.executors import StepResult


@dataclass(frozen=True)
class Stepping:
    """One form of a step: ``step()`` at once, or split into ``step_async()`` and ``step_wait()``.

    The split form checks that the step is pending in between, where a training loop would
    update its learner; both forms must behave the same in every test that takes this fixture.
    """

    split: bool

    def step(self, sampler: LockstepSampler) -> StepBatch:
        """One lock-step of ``sampler`` in this form."""
        if not self.split:
            return sampler.step()
        sampler.step_async()
        assert sampler.pending
        return sampler.step_wait()

    def collect(self, sampler: LockstepSampler, num_steps: int) -> Rollout:
        """``sampler.collect(num_steps)``, or the same lock-steps taken in the split form."""
        if not self.split:
            return sampler.collect(num_steps)
        return Rollout.from_steps([self.step(sampler) for _ in range(num_steps)])

    def step_executor(self, executor: Executor, actions: Mapping[int, Any]) -> dict[int, StepResult]:
        """One step of ``executor`` in this form."""
        if not self.split:
            return executor.step(actions)
        executor.step_async(actions)
        assert executor.pending
        return executor.step_wait()


STEP_FORMS = (Stepping(split=False), Stepping(split=True))


@pytest.fixture(params=STEP_FORMS, ids=["step", "step_async+step_wait"])
def stepping(request: pytest.FixtureRequest) -> Stepping:
    """Run the test once with ``step()`` and once with ``step_async()`` + ``step_wait()``."""
    return request.param


@pytest.fixture
def step_forms() -> tuple[Stepping, Stepping]:
    """Both forms, for tests that compare them: ``(at once, split)``."""
    return STEP_FORMS


def _assert_equal(first: Any, second: Any, where: str) -> None:
    if isinstance(first, dict):
        assert first.keys() == second.keys(), where
        for key in first:
            _assert_equal(first[key], second[key], f"{where}[{key!r}]")
    elif isinstance(first, tuple):
        assert len(first) == len(second), where
        for index, (a, b) in enumerate(zip(first, second)):
            _assert_equal(a, b, f"{where}[{index}]")
    else:
        np.testing.assert_array_equal(first, second, err_msg=where)


def _assert_same_batches(first: Sequence[StepBatch], second: Sequence[StepBatch]) -> None:
    assert len(first) == len(second)
    for t, (a, b) in enumerate(zip(first, second)):
        for field in dataclasses.fields(StepBatch):
            _assert_equal(getattr(a, field.name), getattr(b, field.name), f"lock-step {t}: {field.name}")


@pytest.fixture
def assert_same_batches() -> Callable[[Sequence[StepBatch], Sequence[StepBatch]], None]:
    """``assert_same_batches(first, second)``: every field of every lock-step is equal (obs, actions,
    rewards, masks, ids, extras, infos), dict observations and info dicts included."""
    return _assert_same_batches
