"""Errors that name the clip whose environment or worker failed."""

from __future__ import annotations


class ClipError(RuntimeError):
    """A failure tied to one clip slot; ``clip`` says which."""

    def __init__(self, clip: int, message: str) -> None:
        super().__init__(f"clip {clip}: {message}")
        self.clip = clip


class EnvFactoryError(ClipError):
    """The env factory of a clip raised while building its environment."""


class WorkerTimeoutError(ClipError, TimeoutError):
    """A clip's worker did not answer a command within the executor's timeout."""


class WorkerCrashedError(ClipError):
    """A clip's worker kept dying: restarting it did not help."""


class EnvLostError(RuntimeError):
    """Raised by an env whose simulator died or hung and was replaced.

    The step in flight is lost, like a dead worker's: executors report it as a lost,
    truncated step (``StepResult.worker_died``) and the sampler resets the clip, while the
    worker and its env stay (the env already holds a fresh simulator).
    """
