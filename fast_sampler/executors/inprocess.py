"""In-process executor: all clip environments in this process, stepped one after another."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import gymnasium as gym

from fast_sampler.errors import ClipError, EnvFactoryError, EnvLostError
from fast_sampler.executors.base import (
    EnvFactory,
    Executor,
    ResetResult,
    StepResult,
    check_factories,
    check_same_spaces,
    died_result,
)


def build_env(clip: int, env_fn: EnvFactory) -> gym.Env:
    """Call a clip's factory, turning any exception into an :class:`EnvFactoryError` for that clip."""
    try:
        env = env_fn()
    except Exception as exc:
        raise EnvFactoryError(clip, f"env factory raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(env, gym.Env):
        raise EnvFactoryError(clip, f"env factory returned {type(env).__name__}, expected a gymnasium.Env")
    return env


@contextlib.contextmanager
def _naming_clip(clip: int, command: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        raise ClipError(clip, f"{command} raised {type(exc).__name__}: {exc}") from exc


class InProcessExecutor(Executor):
    """Runs every clip in the calling process; no parallelism, no transport cost.

    The right choice for cheap envs, for tests and for debugging. Stepping cannot overlap the
    caller's work here: :meth:`step_async` only keeps the actions and :meth:`step_wait` steps.
    """

    def __init__(self, env_fns: Sequence[EnvFactory]) -> None:
        check_factories(env_fns)
        self._envs: list[gym.Env] = []
        try:
            for clip, env_fn in enumerate(env_fns):
                self._envs.append(build_env(clip, env_fn))
            spaces = [(env.observation_space, env.action_space) for env in self._envs]
            self.observation_space, self.action_space = check_same_spaces(spaces)
        except Exception:
            self.close()
            raise
        self.num_clips = len(self._envs)

    def _reset(self, seeds: Mapping[int, int | None]) -> dict[int, ResetResult]:
        results = {}
        for clip, seed in seeds.items():
            with _naming_clip(clip, "reset"):
                obs, info = self._envs[clip].reset(seed=seed)
            results[clip] = ResetResult(obs, dict(info))
        return results

    def _finish_step(self, actions: dict[int, Any]) -> dict[int, StepResult]:
        results = {}
        for clip, action in actions.items():
            with _naming_clip(clip, "step"):
                try:
                    obs, reward, terminated, truncated, info = self._envs[clip].step(action)
                except EnvLostError as exc:  # the env replaced its simulator: only this step is lost
                    results[clip] = died_result(f"env of clip {clip} lost its simulator during step ({exc})")
                    continue
            results[clip] = StepResult(obs, float(reward), bool(terminated), bool(truncated), dict(info))
        return results

    def _close(self) -> None:
        envs, self._envs = self._envs, []
        for env in envs:
            env.close()
