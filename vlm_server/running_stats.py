"""Thread-safe running mean and variance (Welford) of the CLIP margin over all clips."""

from __future__ import annotations

import threading
from typing import NamedTuple


class MomentsSnapshot(NamedTuple):
    """Running statistics after an update: sample count, mean and population variance."""

    count: int
    mean: float
    var: float


class RunningMoments:
    """Welford's online mean/variance, shared by every request, never reset.

    A lock makes ``update`` atomic, so concurrent batches see a consistent sequence of
    statistics (equivalent to processing the samples one at a time in some order).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._mean = 0.0
        self._m2 = 0.0

    def update(self, value: float) -> MomentsSnapshot:
        """Add one sample and return the statistics including it."""
        with self._lock:
            self._count += 1
            delta = value - self._mean
            self._mean += delta / self._count
            self._m2 += delta * (value - self._mean)
            return MomentsSnapshot(self._count, self._mean, self._m2 / self._count)

    def snapshot(self) -> MomentsSnapshot:
        with self._lock:
            var = self._m2 / self._count if self._count else 0.0
            return MomentsSnapshot(self._count, self._mean, var)
