"""Fixed-cost backends: a model stand-in costing ``base_ms + per_item_ms * batch`` per call.

They let the benchmark and the tests measure the server itself (batching gain, overhead,
lost replies) without a real model. Answers are a pure function of the request, so a client
can check that every reply belongs to its own request.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from vlm_server.backends.base import AdviseItem, AdviseResult, ClipItem, ClipResult
from vlm_server.errors import UsageError


def expected_action(command: int, speed_mps: float) -> tuple[float, float]:
    """The answer of ``FixedCostAdvisor`` for an item (for reply-integrity checks)."""
    return (max(-1.0, min(1.0, speed_mps / 100.0)), command / 10.0)


class _FixedCost:
    def __init__(
        self,
        base_ms: float = 20.0,
        per_item_ms: float = 0.2,
        fail_id_prefix: str | None = None,
        error_id_prefix: str | None = None,
        load_delay_s: float = 0.0,
    ) -> None:
        if base_ms < 0 or per_item_ms < 0 or load_delay_s < 0:
            raise UsageError("base_ms, per_item_ms and load_delay_s must be >= 0")
        self.base_ms = base_ms
        self.per_item_ms = per_item_ms
        self.fail_id_prefix = fail_id_prefix
        self.error_id_prefix = error_id_prefix
        self.load_delay_s = load_delay_s
        self.batch_sizes: deque[int] = deque(maxlen=100_000)
        self.calls_in_flight = 0
        self.max_calls_in_flight = 0
        self._lock = threading.Lock()

    def load(self) -> None:
        time.sleep(self.load_delay_s)

    def _spend(self, ids: list[str]) -> None:
        with self._lock:
            self.batch_sizes.append(len(ids))
            self.calls_in_flight += 1
            self.max_calls_in_flight = max(
                self.max_calls_in_flight, self.calls_in_flight
            )
        try:
            if self.fail_id_prefix and any(
                i.startswith(self.fail_id_prefix) for i in ids
            ):
                raise RuntimeError("injected backend failure")
            time.sleep((self.base_ms + self.per_item_ms * len(ids)) / 1000.0)
        finally:
            with self._lock:
                self.calls_in_flight -= 1

    def _is_error(self, item_id: str) -> bool:
        return bool(self.error_id_prefix) and item_id.startswith(self.error_id_prefix)


class FixedCostAdvisor(_FixedCost):
    """Advisor answering ``expected_action(command, speed_mps)`` after a fixed delay."""

    def advise_batch(self, items: list[AdviseItem]) -> list[AdviseResult]:
        self._spend([item.id for item in items])
        return [
            AdviseResult(None, error="injected item error")
            if self._is_error(item.id)
            else AdviseResult(
                expected_action(item.command, item.speed_mps), text="fixed"
            )
            for item in items
        ]


class FixedCostScorer(_FixedCost):
    """CLIP stand-in whose bonus is ``acc / 4`` of the executed action."""

    def score_batch(self, items: list[ClipItem]) -> list[ClipResult]:
        self._spend([item.id for item in items])
        return [
            ClipResult(None, error="injected item error")
            if self._is_error(item.id)
            else ClipResult(
                item.action[0] / 4.0,
                margin=0.0,
                stats={"count": 0, "mean": 0.0, "var": 0.0},
            )
            for item in items
        ]
