"""The executor interface: where the N clip environments live and how commands reach them.

A sampler decides *what* to do (which clips step, which reset); an executor decides *where*:
in this process, in one worker process per clip, or in one Ray actor per clip. Every executor
runs a batch of commands in parallel as far as it can and returns when all have answered.

A step can also be split in two, so the caller works while the envs step (EnvPool's send and
recv): :meth:`Executor.step_async` hands the actions over and :meth:`Executor.step_wait`
collects the results; :meth:`Executor.step` is the two back to back. At most one step is in
flight, and nothing else may be asked of the executor until it is collected.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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

    Subclasses implement :meth:`_reset` and :meth:`_finish_step`, and :meth:`_start_step` when
    they can step in the background; the public methods add the checks that keep at most one
    step in flight. The default :meth:`_start_step` only keeps the actions, so an executor that
    cannot overlap does all its work in :meth:`step_wait`.

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
    _in_flight: _InFlight | None = None

    @property
    def pending(self) -> bool:
        """True between :meth:`step_async` and :meth:`step_wait`: a step is in flight."""
        return self._in_flight is not None

    def reset(self, seeds: Mapping[int, int | None]) -> dict[int, ResetResult]:
        """Reset the given clips (keys) with the given seeds, in parallel.

        Raises:
            RuntimeError: while a step is pending (its results would be lost).
        """
        self._check_no_step_pending("reset")
        return self._reset(seeds)

    def step(self, actions: Mapping[int, Any]) -> dict[int, StepResult]:
        """Step the given clips (keys) with their actions, in parallel: :meth:`step_async` then :meth:`step_wait`.

        Raises:
            RuntimeError: while a step is pending.
        """
        self._check_no_step_pending("step")
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Mapping[int, Any]) -> None:
        """Start stepping the given clips (keys) with their actions; :meth:`step_wait` collects the results.

        Executors with workers send the commands and return at once, so the caller can work
        while the envs step; others only keep the actions until :meth:`step_wait`.

        Raises:
            RuntimeError: while another step is pending.
        """
        self._check_no_step_pending("step_async")
        self._in_flight = _InFlight(self._start_step(dict(actions)))

    def step_wait(self) -> dict[int, StepResult]:
        """Wait for the step started by :meth:`step_async` and return its results, keyed by clip.

        Lost steps, worker restarts and timeouts are reported as by :meth:`step`; the step is
        no longer pending afterwards, even when this raises.

        Raises:
            RuntimeError: when no step is pending.
        """
        if self._in_flight is None:
            raise RuntimeError("step_wait: no step is pending; call step_async(actions) first")
        in_flight, self._in_flight = self._in_flight, None
        return self._finish_step(in_flight.started)

    def close(self) -> None:
        """Release the environments and workers, dropping a pending step; safe to call twice."""
        self._in_flight = None
        self._close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- what subclasses implement ------------------------------------------------------------

    @abc.abstractmethod
    def _reset(self, seeds: Mapping[int, int | None]) -> dict[int, ResetResult]:
        """Reset the given clips with the given seeds, in parallel (no step is pending)."""

    def _start_step(self, actions: dict[int, Any]) -> Any:
        """Start a step and return what :meth:`_finish_step` needs to finish it.

        The default starts nothing and returns the actions: executors that cannot overlap
        stepping with the caller's work step in :meth:`_finish_step`.
        """
        return actions

    @abc.abstractmethod
    def _finish_step(self, started: Any) -> dict[int, StepResult]:
        """Finish the step that :meth:`_start_step` returned ``started`` for; return its results."""

    def _close(self) -> None:  # noqa: B027 (optional hook: in-memory executors have nothing to release)
        """Release the environments and workers; called by :meth:`close`, perhaps twice."""

    def _check_no_step_pending(self, call: str) -> None:
        if self._in_flight is not None:
            raise RuntimeError(f"{call}: a step is pending; call step_wait() to collect it first")


@dataclass(frozen=True)
class _InFlight:
    """The step between :meth:`Executor.step_async` and :meth:`Executor.step_wait`."""

    started: Any


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
