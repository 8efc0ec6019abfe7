import asyncio
import time

import pytest

from vlm_server.batcher import (
    BackendError,
    Completed,
    DynamicBatcher,
    QueueFullError,
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
