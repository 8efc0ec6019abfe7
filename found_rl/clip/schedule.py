"""When a training run stops, and the learning rate on the way there.

A run stops after ``epochs``, after ``max_minutes`` of wall time, or at whichever comes first
when both are given. With ``max_minutes`` alone, epochs repeat until the time is used: the
budget is the stopping rule, not only a cap (issue 32: a "20-minute" fine-tune that stopped by
its default epoch count after 7.4 minutes did not use its budget). Without either the run
takes ``DEFAULT_EPOCHS``.

The learning rate warms up linearly over the first steps, then follows open_clip's cosine decay
to 0 at the end of the run; with a time budget the end is measured in wall time, so the decay
follows whichever rule is nearer its end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_EPOCHS = 6


@dataclass(frozen=True)
class RunLength:
    """How long a run trains.

    Attributes:
        steps_per_epoch: optimiser steps in one pass over the training frames (>= 1).
        epochs: stop after this many epochs (None: only the time budget stops the run).
        max_minutes: stop after this much wall time (None: only the epochs do).
    """

    steps_per_epoch: int
    epochs: int | None
    max_minutes: float | None

    @classmethod
    def of(cls, steps_per_epoch: int, epochs: int | None, max_minutes: float | None) -> RunLength:
        """The run length a user asked for: ``DEFAULT_EPOCHS`` when neither flag is given."""
        if epochs is None and max_minutes is None:
            epochs = DEFAULT_EPOCHS
        return cls(steps_per_epoch, epochs, max_minutes)

    def __post_init__(self) -> None:
        if self.steps_per_epoch < 1:
            raise ValueError(f"steps_per_epoch must be >= 1, got {self.steps_per_epoch}")
        if self.epochs is None and self.max_minutes is None:
            raise ValueError("a run needs epochs or max_minutes to stop")
        if self.epochs is not None and self.epochs < 1:
            raise ValueError(f"--epochs must be >= 1, got {self.epochs}")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"--max-minutes must be > 0, got {self.max_minutes}")

    @property
    def total_steps(self) -> int | None:
        """Steps of the whole run when the epochs decide it (None under a time budget alone)."""
        return None if self.epochs is None else self.epochs * self.steps_per_epoch

    def progress(self, step: int, elapsed_s: float, warmup_steps: int = 0) -> float:
        """How far the run is towards its end, in [0, 1]: the nearer of its rules.

        Steps count from the end of the warm-up, as open_clip's cosine schedule does.
        """
        fractions = [0.0]
        if self.total_steps is not None:
            fractions.append((step - warmup_steps) / max(1, self.total_steps - warmup_steps))
        if self.max_minutes is not None:
            fractions.append(elapsed_s / (self.max_minutes * 60.0))
        return min(1.0, max(fractions))

    def stop_reason(self, step: int, elapsed_s: float) -> str | None:
        """The flag that ends the run at ``step`` after ``elapsed_s`` seconds, None while it goes on."""
        if self.total_steps is not None and step >= self.total_steps:
            return f"--epochs {self.epochs}"
        if self.max_minutes is not None and elapsed_s >= self.max_minutes * 60.0:
            return f"--max-minutes {self.max_minutes:g}"
        return None


def learning_rate(step: int, progress: float, peak_lr: float, warmup_steps: int) -> float:
    """Linear warm-up to ``peak_lr`` over ``warmup_steps``, then cosine decay to 0 at ``progress`` 1."""
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, progress)))) * peak_lr
