import asyncio
import time

import pytest

from vlm_server.batcher import (
    BackendError,
    Completed,
    DynamicBatcher,
    PredictedLateError,
    QueueFullError,
    RequestTooLargeError,
    ShuttingDownError,
    gather_within,
)
from vlm_server.config import BatchingConfig


class Recorder:
    """Async run_batch that records batch contents and takes ``cost_s`` per call."""

    def __init__(self, cost_s: float = 0.0, fail: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.cost_s = cost_s
        self.fail = fail

    async def __call__(self, items):
        self.batches.append(list(items))
        await asyncio.sleep(self.cost_s)
        if self.fail:
            raise RuntimeError("secret internal detail")
        return [item * 10 for item in items]


def make(recorder, **batching) -> DynamicBatcher:
    batcher = DynamicBatcher("test", recorder, BatchingConfig(**batching))
    batcher.start()
    return batcher


async def test_full_batch_flushes_without_waiting_for_the_timer():
    recorder = Recorder()
    batcher = make(recorder, max_batch_size=4, max_wait_ms=10_000)
    started = time.perf_counter()
    results = await asyncio.wait_for(
        asyncio.gather(*batcher.submit([1, 2, 3, 4])), timeout=2.0
    )
    assert time.perf_counter() - started < 1.0
    assert [r.result for r in results] == [10, 20, 30, 40]
    assert recorder.batches == [[1, 2, 3, 4]]
    assert all(isinstance(r, Completed) and r.batch_size == 4 for r in results)
    await batcher.close()


async def test_partial_batch_flushes_when_the_oldest_item_is_max_wait_old():
    recorder = Recorder()
    batcher = make(recorder, max_batch_size=64, max_wait_ms=60)
    started = time.perf_counter()
    first = batcher.submit([1])
    await asyncio.sleep(0.02)
    second = batcher.submit([2])
    results = await asyncio.gather(*first, *second)
    elapsed = time.perf_counter() - started
    assert recorder.batches == [[1, 2]]
    assert elapsed >= 0.055  # timed from the oldest item, not the newest
    assert results[0].queue_s >= 0.055
    await batcher.close()


async def test_batches_never_exceed_max_batch_size_and_keep_order():
    recorder = Recorder(cost_s=0.01)
    batcher = make(recorder, max_batch_size=5, max_wait_ms=1)
    futures = batcher.submit(list(range(23)))
    results = await asyncio.gather(*futures)
    assert [r.result for r in results] == [i * 10 for i in range(23)]
    assert max(len(b) for b in recorder.batches) <= 5
    assert [i for b in recorder.batches for i in b] == list(range(23))
    await batcher.close()


async def test_items_queue_while_a_batch_runs_and_go_in_the_next_one():
    recorder = Recorder(cost_s=0.05)
    batcher = make(recorder, max_batch_size=32, max_wait_ms=0)
    first = batcher.submit([0])
    await asyncio.sleep(0.01)  # batch [0] is running now
    rest = batcher.submit(list(range(1, 11)))
    await asyncio.gather(*first, *rest)
    assert recorder.batches == [[0], list(range(1, 11))]
    await batcher.close()


async def test_full_queue_refuses_all_items_with_a_retry_hint():
    recorder = Recorder(cost_s=0.05)
    batcher = make(recorder, max_batch_size=2, max_wait_ms=0, max_queue_size=4)
    running = batcher.submit([0, 1])
    await asyncio.sleep(0.01)
    queued = batcher.submit([2, 3, 4])
    with pytest.raises(QueueFullError) as error:
        batcher.submit([5, 6])
    assert error.value.retry_after_s > 0
    assert batcher.depth == 3  # nothing of the refused request was queued
    await asyncio.gather(*running, *queued)
    await batcher.close()


async def test_a_request_predicted_to_miss_its_deadline_is_refused_at_once():
    recorder = Recorder(cost_s=0.1)  # a slow model: 10 items/s at batches of 1
    batcher = make(recorder, max_batch_size=1, max_wait_ms=0)
    assert batcher.predicted_wait_s() is None  # nothing measured yet: nothing refused
    await batcher.submit([0], deadline_s=0.001)[0]
    assert batcher.service_rate == pytest.approx(10.0, rel=0.5)
    queued = batcher.submit([1, 2, 3, 4])
    depth = batcher.depth
    started = time.perf_counter()
    with pytest.raises(PredictedLateError, match=r"predicted wait .* exceeds .* deadline") as error:
        batcher.submit([5], deadline_s=0.2)
    assert time.perf_counter() - started < 0.05  # refused now, not after the deadline
    assert error.value.retry_after_s >= 0.3  # 3+ queued items at ~10/s, plus its own batch
    assert batcher.depth == depth  # nothing of the refused request was queued
    admitted = batcher.submit([6], deadline_s=30.0)  # a generous deadline is queued
    results = await asyncio.gather(*queued, *admitted)
    assert [r.result for r in results] == [10, 20, 30, 40, 60]
    assert all(5 not in batch for batch in recorder.batches)
    await batcher.close()


async def test_a_request_finding_an_empty_queue_is_admitted_whatever_the_estimate():
    """A stale estimate (a slow first batch) must not refuse everything: nothing would correct it."""
    recorder = Recorder(cost_s=0.2)
    batcher = make(recorder, max_batch_size=1, max_wait_ms=0)
    await batcher.submit([0])[0]
    recorder.cost_s = 0.0
    assert (await batcher.submit([1], deadline_s=0.01)[0]).result == 10
    await batcher.close()


async def test_admission_by_predicted_wait_can_be_turned_off():
    recorder = Recorder(cost_s=0.05)
    batcher = make(recorder, max_batch_size=1, max_wait_ms=0, admit_by_predicted_wait=False)
    await batcher.submit([0])[0]
    queued = batcher.submit([1, 2, 3])
    late = batcher.submit([4], deadline_s=0.001)  # queued: the server answers 504 later
    await asyncio.gather(*queued, *late)
    await batcher.close()


async def test_cancelled_items_are_dropped_before_dispatch():
    recorder = Recorder(cost_s=0.05)
    batcher = make(recorder, max_batch_size=8, max_wait_ms=0)
    running = batcher.submit([0])
    await asyncio.sleep(0.01)
    abandoned = batcher.submit([1, 2])
    kept = batcher.submit([3])
    for future in abandoned:
        future.cancel()
    await asyncio.gather(*running, *kept)
    assert recorder.batches == [[0], [3]]
    await batcher.close()


async def test_cancelled_items_stop_counting_against_the_queue_limit_at_once():
    """A deadline storm must not turn into 429s for the next requests (issue 12)."""
    recorder = Recorder(cost_s=0.2)
    batcher = make(recorder, max_batch_size=1, max_wait_ms=0, max_queue_size=4)
    running = batcher.submit([0])
    await asyncio.sleep(0.02)  # [0] runs for 0.2 s; the queue is empty
    timed_out = batcher.submit([1, 2, 3, 4])
    for future in timed_out:
        future.cancel()
    await asyncio.sleep(0)  # the cancellation callbacks run
    assert batcher.depth == 0
    fresh = batcher.submit([5, 6, 7, 8])  # refused before: 4 dead + 4 new > 4
    await asyncio.gather(*running, *fresh)
    assert recorder.batches == [[0], [5], [6], [7], [8]]
    await batcher.close()


async def test_cancelled_items_do_not_fill_a_batch_early():
    recorder = Recorder()
    batcher = make(recorder, max_batch_size=4, max_wait_ms=150)
    for future in batcher.submit([1, 2, 3]):
        future.cancel()
    await asyncio.sleep(0)
    started = time.perf_counter()
    (kept,) = batcher.submit([4])  # 3 dead + 1 live used to count as a full batch
    result = await kept
    assert time.perf_counter() - started >= 0.14  # waited max_wait_ms for more items
    assert recorder.batches == [[4]] and result.batch_size == 1
    await batcher.close()


async def test_a_cancelled_oldest_item_does_not_set_the_flush_time():
    recorder = Recorder()
    batcher = make(recorder, max_batch_size=8, max_wait_ms=150)
    (gone,) = batcher.submit([1])
    await asyncio.sleep(0.1)
    gone.cancel()
    started = time.perf_counter()
    (kept,) = batcher.submit([2])
    result = await kept
    assert time.perf_counter() - started >= 0.14  # timed from item 2, not from the cancelled item 1
    assert result.queue_s >= 0.14
    await batcher.close()


async def test_a_request_larger_than_the_queue_is_refused_as_too_large_not_full():
    batcher = make(Recorder(), max_batch_size=2, max_wait_ms=0, max_queue_size=3)
    with pytest.raises(RequestTooLargeError, match=r"4 items in one request.*at most 3 \(max_queue_size\)"):
        batcher.submit([1, 2, 3, 4])
    assert batcher.depth == 0
    await batcher.close()


async def test_close_resolves_running_items_when_the_drain_timeout_expires():
    recorder = Recorder(cost_s=30.0)
    batcher = make(recorder, max_batch_size=2, max_wait_ms=0)
    running = batcher.submit([1, 2])
    await asyncio.sleep(0.02)
    queued = batcher.submit([3])
    await asyncio.wait_for(batcher.close(timeout_s=0.05), timeout=2.0)
    assert all(future.done() for future in running + queued)
    for future in running + queued:
        assert isinstance(future.exception(), ShuttingDownError)


async def test_backend_exception_fails_only_that_batch_with_a_safe_message():
    recorder = Recorder(fail=True)
    batcher = make(recorder, max_batch_size=4, max_wait_ms=0)
    outcomes = await asyncio.gather(*batcher.submit([1, 2]), return_exceptions=True)
    assert all(isinstance(o, BackendError) for o in outcomes)
    assert "secret" not in str(outcomes[0])
    recorder.fail = False
    assert (await batcher.submit([3])[0]).result == 30  # the worker survived
    await batcher.close()


async def test_close_drains_queued_items_then_refuses_new_ones():
    recorder = Recorder(cost_s=0.02)
    batcher = make(recorder, max_batch_size=2, max_wait_ms=1000)
    futures = batcher.submit([1, 2, 3, 4, 5])
    await batcher.close()
    assert [f.result().result for f in futures] == [10, 20, 30, 40, 50]
    with pytest.raises(ShuttingDownError):
        batcher.submit([6])


async def test_concurrent_batches_are_bounded():
    active = 0
    peak = 0

    async def run(items):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.02)
        active -= 1
        return items

    batcher = DynamicBatcher(
        "test",
        run,
        BatchingConfig(max_batch_size=1, max_wait_ms=0, max_concurrent_batches=3),
    )
    batcher.start()
    await asyncio.gather(*batcher.submit(list(range(12))))
    assert peak == 3
    await batcher.close()


async def test_gather_within_returns_results_and_exceptions_in_order():
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(3)]
    futures[0].set_result(1)
    futures[1].set_exception(BackendError("x"))
    futures[2].set_result(3)
    outcomes = await gather_within(futures, 1.0)
    assert (
        outcomes[0] == 1 and isinstance(outcomes[1], BackendError) and outcomes[2] == 3
    )
    single = loop.create_future()
    single.set_exception(BackendError("y"))
    assert isinstance((await gather_within([single], 1.0))[0], BackendError)


@pytest.mark.parametrize("count", [1, 3])
async def test_gather_within_cancels_and_raises_timeout_at_the_deadline(count):
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in range(count)]
    with pytest.raises(TimeoutError):
        await gather_within(futures, 0.02)
    assert all(future.cancelled() for future in futures)
