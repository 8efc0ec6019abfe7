"""The executor interface: where the N clip environments live and how commands reach them.

A sampler decides *what* to do (which clips step, which reset); an executor decides *where*:
in this process, in one worker process per clip, or in one Ray actor per clip. Every executor
runs a batch of commands in parallel as far as it can and returns when all have answered.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium as gym

EnvFactory = Callable[[], gym.Env]


class StepResult(NamedTuple):
    """What one clip's ``env.step`` returned.

    When the clip's worker died during the step, ``worker_died`` is True, ``obs`` is None, the
    reward is 0 and ``truncated`` is True: the step is lost, the worker has been restarted and
    needs a reset before it can step again. An env that raised
    :class:`~fast_sampler.errors.EnvLostError` (its simulator was replaced) gives the same
    result, with the worker kept.
    """

    obs: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    worker_died: bool = False


class ResetResult(NamedTuple):
    """What one clip's ``env.reset`` returned."""

    obs: Any
    info: dict[str, Any]


def died_result(message: str) -> StepResult:
    return StepResult(None, 0.0, False, True, {"worker_died": message}, worker_died=True)


class Executor(abc.ABC):
    """N clip environments behind one interface.

    Attributes:
        num_clips: N, the number of clip slots (0 … N − 1).
        observation_space: shared by all clips (checked at start-up).
        action_space: shared by all clips (checked at start-up).
        worker_restarts: how many times a dead worker was replaced.
    """

    num_clips: int
    observation_space: gym.Space
    action_space: gym.Space
    worker_restarts: int = 0

    @abc.abstractmethod
    def reset(self, seeds: Mapping[int, int | None]) -> dict[int, ResetResult]:
        """Reset the given clips (keys) with the given seeds, in parallel."""

    @abc.abstractmethod
    def step(self, actions: Mapping[int, Any]) -> dict[int, StepResult]:
        """Step the given clips (keys) with their actions, in parallel."""

    def close(self) -> None:  # noqa: B027 (optional hook: in-memory executors have nothing to release)
        """Release the environments and workers; safe to call twice."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def check_same_spaces(spaces: Sequence[tuple[gym.Space, gym.Space]]) -> tuple[gym.Space, gym.Space]:
    """Return clip 0's (observation, action) spaces after checking every clip has the same.

    Raises:
        ValueError: naming the first clip whose space differs from clip 0's.
    """
    observation_space, action_space = spaces[0]
    for clip, (obs_space, act_space) in enumerate(spaces):
        if obs_space != observation_space:
            raise ValueError(
                f"clip {clip}: observation_space {obs_space} differs from clip 0's {observation_space}; "
                "all clips must share one observation space"
            )
        if act_space != action_space:
            raise ValueError(
                f"clip {clip}: action_space {act_space} differs from clip 0's {action_space}; "
                "all clips must share one action space"
            )
    return observation_space, action_space


def check_factories(env_fns: Sequence[EnvFactory]) -> None:
    if len(env_fns) == 0:
        raise ValueError("env_fns: expected at least one env factory, got none")
    for clip, env_fn in enumerate(env_fns):
        if not callable(env_fn):
            raise ValueError(f"env_fns[{clip}]: expected a callable returning a gymnasium.Env, got {env_fn!r}")
