"""Dynamic batcher: groups queued items into model calls by size or by the oldest item's age.

A batch is flushed as soon as ``max_batch_size`` items are queued **or** ``max_wait_ms`` has
passed since the oldest queued item arrived, whichever is first. Batches run through an async
``run_batch`` callable (the server wraps sync backends in an executor thread), at most
``max_concurrent_batches`` at a time; while they run, new items keep queueing. The queue is
bounded: ``submit`` raises ``QueueFullError`` instead of letting latency grow without limit,
and ``RequestTooLargeError`` for a request that could never fit.

Admission by expected wait (``admit_by_predicted_wait``): the batcher measures its service
rate (items/s, an EWMA over completed batches) and predicts how long a new request would take
to be answered: the time until a model slot frees, plus the live items ahead at that rate, plus
one batch of its own. A request that finds items queued and whose prediction exceeds its
remaining deadline is refused at once with ``PredictedLateError`` (the server answers 503 with
the prediction as Retry-After) instead of being queued only to time out (504) after its client
has given up, which under a slow model made a busy server look like a dead one. Nothing is
refused before the first batch has completed: without a measurement there is no prediction.

Only *live* items count: an item whose caller gave up (deadline, client gone) stops counting
against ``max_queue_size`` and ``max_batch_size`` the moment its future is cancelled, and never
sets the flush timer. Otherwise a storm of timed-out requests would refuse new ones (429) and
flush small batches early until the dead items were popped.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from vlm_server.config import BatchingConfig
from vlm_server.metrics import ServerMetrics

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

logger = logging.getLogger(__name__)

RATE_EWMA_WEIGHT = 0.2  # weight of the newest batch in the service-rate and batch-time averages


class QueueFullError(Exception):
    """The batcher's queue cannot take the request; retry after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PredictedLateError(QueueFullError):
    """The request would not be answered within its deadline; retry after ``retry_after_s``.

    ``retry_after_s`` is the predicted wait: by then the items queued now have been served.
    """

    def __init__(self, message: str, retry_after_s: float, deadline_s: float) -> None:
        super().__init__(message, retry_after_s)
        self.deadline_s = deadline_s


class RequestTooLargeError(Exception):
    """A request holds more items than the queue can ever hold: retrying cannot help."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class ShuttingDownError(Exception):
    """The batcher is draining and accepts no new items."""


class BackendError(Exception):
    """The backend raised while running a batch; the message is safe to show to clients."""


class Completed(NamedTuple):
    """A finished item: the backend's result and where its time went (seconds)."""

    result: Any
    queue_s: float
    model_s: float
    batch_size: int


@dataclass
class _Pending:
    item: Any
    future: asyncio.Future
    enqueued_s: float
    is_live: bool = True  # queued and wanted: counts against the limits


class DynamicBatcher(Generic[ItemT, ResultT]):
    """Per-backend queue plus one worker task that forms and dispatches batches."""

    def __init__(
        self,
        name: str,
        run_batch: Callable[[list[ItemT]], Awaitable[Sequence[ResultT]]],
        config: BatchingConfig,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self.name = name
        self._run_batch = run_batch
        self._config = config
        self._metrics = metrics
        self._queue: deque[_Pending] = deque()  # live items and not yet popped dead ones
        self._live = 0
        self._nonempty = asyncio.Event()
        self._flush_now: asyncio.Future | None = (
            None  # resolved early when a batch is full
        )
        self._slots = asyncio.Semaphore(config.max_concurrent_batches)
        self._running: set[asyncio.Task] = set()
        self._worker: asyncio.Task | None = None
        self._is_closing = False
        self._mean_batch_s = config.max_wait_ms / 1000.0 + 0.01  # a guess until a batch completes
        self._rate_items_per_s: float | None = None  # measured; None before the first batch
        self._running_started_s: list[float] = []  # start times of the batches running now

    @property
    def depth(self) -> int:
        """Live items queued and not yet dispatched (cancelled ones do not count)."""
        return self._live

    @property
    def service_rate(self) -> float | None:
        """Measured items per second with every model slot busy; None before the first batch."""
        return self._rate_items_per_s

    def predicted_wait_s(self, n_items: int = 1) -> float | None:
        """Seconds until a request of ``n_items`` submitted now would be answered.

        The time until a model slot frees (when all are busy), plus the live items ahead (and
        this request's items beyond its first batch) at the measured rate, plus one batch.
        None before the first batch has completed: there is nothing to predict from.
        """
        rate = self._rate_items_per_s
        if rate is None:
            return None
        slot_free_in_s = 0.0
        if len(self._running_started_s) >= self._config.max_concurrent_batches:
            running_for_s = time.perf_counter() - min(self._running_started_s)
            slot_free_in_s = max(0.0, self._mean_batch_s - running_for_s)
        beyond_first_batch = max(0, n_items - self._config.max_batch_size)
        return slot_free_in_s + (self._live + beyond_first_batch) / rate + self._mean_batch_s

    def start(self) -> None:
        self._worker = asyncio.get_running_loop().create_task(
            self._work(), name=f"batcher-{self.name}"
        )

    def submit(
        self, items: Sequence[ItemT], deadline_s: float | None = None
    ) -> list[asyncio.Future]:
        """Queue all ``items`` (all or none) and return one future per item.

        Each future resolves to a ``Completed`` or raises ``BackendError``. Cancelling a
        future (deadline, client gone) drops the item if it has not been dispatched yet.

        Args:
            items: the request's backend items.
            deadline_s: seconds the caller will wait for the answers. With
                ``admit_by_predicted_wait``, a request predicted to miss it is refused.

        Raises:
            ShuttingDownError: the batcher is closing.
            RequestTooLargeError: more items than the queue can ever hold.
            QueueFullError: the queue is full (``PredictedLateError``: the request would miss
                ``deadline_s``); retry after ``retry_after_s``.
        """
        if self._is_closing:
            raise ShuttingDownError(f"{self.name} is shutting down")
        limit = self._config.max_queue_size
        if len(items) > limit:
            raise RequestTooLargeError(
                f"{len(items)} items in one request, but the {self.name} queue holds at most "
                f"{limit} (max_queue_size): split the request",
                limit=limit,
            )
        if self._live + len(items) > limit:
            batches_ahead = self._live / self._config.max_batch_size + 1
            raise QueueFullError(
                f"{self.name} queue is full ({self._live}/{limit} items)",
                retry_after_s=batches_ahead * self._mean_batch_s,
            )
        if deadline_s is not None and self._config.admit_by_predicted_wait:
            self._check_predicted_wait(len(items), deadline_s)
        loop = asyncio.get_running_loop()
        now = time.perf_counter()
        futures = []
        for item in items:
            future = loop.create_future()
            pending = _Pending(item, future, now)
            future.add_done_callback(functools.partial(self._on_done, pending))
            self._queue.append(pending)
            futures.append(future)
        self._live += len(items)
        self._nonempty.set()
        if self._live >= self._config.max_batch_size:
            _resolve(self._flush_now)
        self._report_depth()
        return futures

    def _check_predicted_wait(self, n_items: int, deadline_s: float) -> None:
        """Refuse a request that would wait past its deadline: a fast 503 beats a late 504.

        A request that finds no live item queued is always admitted: it goes into the next
        batch, and its batch refreshes a stale estimate (a first batch slowed by warm-up would
        otherwise refuse everything forever, as refused requests measure nothing).
        """
        if self._live == 0:
            return
        wait_s = self.predicted_wait_s(n_items)
        if wait_s is not None and wait_s > deadline_s:
            raise PredictedLateError(
                f"{self.name} is busy: predicted wait {wait_s:.2f} s ({self._live} items queued at "
                f"{self._rate_items_per_s:.1f} items/s) exceeds the request's remaining deadline of "
                f"{deadline_s:.2f} s; retry after {wait_s:.2f} s",
                retry_after_s=wait_s,
                deadline_s=deadline_s,
            )

    def _on_done(self, pending: _Pending, future: asyncio.Future) -> None:
        """A queued item's future finished before dispatch (its caller cancelled it): stop counting it."""
        if pending.is_live:
            pending.is_live = False
            self._live -= 1
            self._report_depth()

    def _pop_live(self) -> _Pending | None:
        """The oldest live item, dropping dead ones in front of it; None when none is left."""
        while self._queue:
            pending = self._queue.popleft()
            if pending.is_live and not pending.future.done():
                pending.is_live = False
                self._live -= 1
                return pending
        return None

    def _drop_dead_head(self) -> None:
        while self._queue and not self._queue[0].is_live:
            self._queue.popleft()

    async def close(self, timeout_s: float = 30.0) -> None:
        """Stop accepting items, finish everything queued or running, then stop the worker.

        Whatever is still queued or running when ``timeout_s`` expires fails with
        ``ShuttingDownError``: every future is resolved, none is left pending.
        """
        self._is_closing = True
        _resolve(self._flush_now)
        deadline = time.perf_counter() + timeout_s
        while (self._live or self._running) and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)
        while (pending := self._pop_live()) is not None:
            pending.future.set_exception(ShuttingDownError(f"{self.name} shut down"))
        self._queue.clear()
        self._report_depth()
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        for task in list(self._running):
            task.cancel()  # _execute fails its items on cancellation
        await asyncio.gather(*self._running, return_exceptions=True)

    async def _work(self) -> None:
        max_batch = self._config.max_batch_size
        max_wait_s = self._config.max_wait_ms / 1000.0
        while True:
            await self._nonempty.wait()
            self._drop_dead_head()
            if not self._queue:
                self._nonempty.clear()
                continue
            remaining_s = self._queue[0].enqueued_s + max_wait_s - time.perf_counter()
            if self._live < max_batch and remaining_s > 0 and not self._is_closing:
                await self._wait_for_flush(remaining_s)
                self._drop_dead_head()
                if self._queue and self._live < max_batch and not self._is_closing:
                    # woken early by a cancellation at the head? wait for the new oldest item
                    next_s = self._queue[0].enqueued_s + max_wait_s - time.perf_counter()
                    if next_s > 0:
                        continue
            await self._slots.acquire()
            batch: list[_Pending] = []
            while len(batch) < max_batch and (pending := self._pop_live()) is not None:
                batch.append(pending)
            self._drop_dead_head()
            if not self._queue:
                self._nonempty.clear()
            self._report_depth()
            if not batch:
                self._slots.release()
                continue
            task = asyncio.get_running_loop().create_task(self._execute(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _wait_for_flush(self, timeout_s: float) -> None:
        """Sleep until the queue holds a full batch, the batcher closes, or ``timeout_s`` passes."""
        loop = asyncio.get_running_loop()
        self._flush_now = loop.create_future()
        timer = loop.call_later(timeout_s, _resolve, self._flush_now)
        try:
            await self._flush_now
        finally:
            timer.cancel()
            self._flush_now = None

    async def _execute(self, batch: list[_Pending]) -> None:
        started_s = time.perf_counter()
        self._running_started_s.append(started_s)
        try:
            try:
                results = list(
                    await self._run_batch([pending.item for pending in batch])
                )
                if len(results) != len(batch):
                    raise RuntimeError(
                        f"returned {len(results)} results for {len(batch)} items"
                    )
                error = None
            except Exception as exc:  # a backend bug must not take the server down
                logger.exception(
                    "backend %s failed on a batch of %d", self.name, len(batch)
                )
                results, error = (
                    [],
                    BackendError(f"{self.name} backend failed: {type(exc).__name__}"),
                )
            except asyncio.CancelledError:
                # close() gave up waiting: the callers get an answer, not a future that never resolves
                for pending in batch:
                    if not pending.future.done():
                        pending.future.set_exception(ShuttingDownError(f"{self.name} shut down mid-batch"))
                raise
            model_s = time.perf_counter() - started_s
            if error is None:
                self._measure(len(batch), model_s)
            if self._metrics is not None:
                self._metrics.observe_batch(
                    self.name, len(batch), model_s, error is not None
                )
            for index, pending in enumerate(batch):
                queue_s = started_s - pending.enqueued_s
                if self._metrics is not None:
                    self._metrics.queue_wait_seconds.labels(self.name).observe(queue_s)
                if pending.future.done():
                    continue
                if error is not None:
                    pending.future.set_exception(error)
                else:
                    pending.future.set_result(
                        Completed(results[index], queue_s, model_s, len(batch))
                    )
        finally:
            self._running_started_s.remove(started_s)
            self._slots.release()

    def _measure(self, batch_size: int, model_s: float) -> None:
        """Fold a completed batch into the batch-time and service-rate averages.

        The rate assumes every model slot is busy, as it is whenever a queue has formed: that
        is when predictions matter. The first batch replaces the initial guesses.
        """
        model_s = max(model_s, 1e-6)
        rate = batch_size * self._config.max_concurrent_batches / model_s
        if self._rate_items_per_s is None:
            self._mean_batch_s, self._rate_items_per_s = model_s, rate
            return
        w = RATE_EWMA_WEIGHT
        self._mean_batch_s = (1 - w) * self._mean_batch_s + w * model_s
        self._rate_items_per_s = (1 - w) * self._rate_items_per_s + w * rate

    def _report_depth(self) -> None:
        if self._metrics is not None:
            self._metrics.queue_depth.labels(self.name).set(self._live)


def _resolve(future: asyncio.Future | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


async def gather_within(futures: list[asyncio.Future], timeout_s: float) -> list[Any]:
    """Outcomes (result or exception) of ``futures``, in order.

    After ``timeout_s`` the futures are cancelled (so undispatched items are dropped) and
    ``TimeoutError`` is raised. Uses one timer and no extra task: this is on every request's path.
    """
    loop = asyncio.get_running_loop()
    waiter = (
        futures[0]
        if len(futures) == 1
        else asyncio.gather(*futures, return_exceptions=True)
    )
    has_expired = False

    def expire() -> None:
        nonlocal has_expired
        has_expired = True
        waiter.cancel()

    timer = loop.call_later(max(timeout_s, 0.0), expire)
    try:
        if len(futures) > 1:
            return await waiter
        try:
            return [await waiter]
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return [exc]
    except asyncio.CancelledError:
        for future in futures:
            future.cancel()
        if has_expired:
            raise TimeoutError from None
        raise
    finally:
        timer.cancel()
