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
