"""Closed-loop load generator: N clients each sending one request at a time, checking replies.

Used by ``found-rl bench server``. Each reply is checked against its own request (same id,
expected answer), so lost, duplicated and mixed-up replies are counted, not assumed away.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import numpy as np

# index -> (item id, JSON body bytes, predicate on the reply item)
RequestFactory = Callable[[int], tuple[str, bytes, Callable[[dict[str, Any]], bool]]]


@dataclass(frozen=True)
class LoadResult:
    """Outcome of one load level. Latency arrays are per successful reply, in ms."""

    clients: int
    sent: int
    lost: int
    duplicated: int
    mismatched: int
    rejected_429: int
    duration_s: float
    latency_ms: np.ndarray
    overhead_ms: np.ndarray  # end-to-end minus queue wait minus model time
    model_ms: np.ndarray

    @property
    def requests_per_s(self) -> float:
        return len(self.latency_ms) / self.duration_s if self.duration_s > 0 else 0.0

    def latency_percentile(self, q: float) -> float:
        return (
            float(np.percentile(self.latency_ms, q))
            if len(self.latency_ms)
            else float("nan")
        )

    def overhead_percentile(self, q: float) -> float:
        return (
            float(np.percentile(self.overhead_ms, q))
            if len(self.overhead_ms)
            else float("nan")
        )


async def run_load(
    url: str,
    make_request: RequestFactory,
    *,
    clients: int,
    max_requests: int,
    max_duration_s: float,
    token: str | None = None,
    request_timeout_s: float = 60.0,
) -> LoadResult:
    """Run ``clients`` closed loops until ``max_requests`` are sent or ``max_duration_s`` passes.

    429 answers are retried after the server's ``retry_after_ms`` (they are not losses); any
    other failure leaves the request without a reply, i.e. lost.
    """
    indices = itertools.count()
    replies: Counter[str] = Counter()
    sent_ids: set[str] = set()
    counts = {"mismatched": 0, "rejected": 0}
    latencies: list[float] = []
    overheads: list[float] = []
    models: list[float] = []
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    started = time.perf_counter()
    stop_at = started + max_duration_s

    async def client_loop(session: aiohttp.ClientSession) -> None:
        for index in indices:
            if index >= max_requests or time.perf_counter() >= stop_at:
                return
            item_id, body, is_expected = make_request(index)
            sent_ids.add(item_id)
            while True:
                t0 = time.perf_counter()
                try:
                    async with session.post(
                        url, data=body, headers=headers
                    ) as response:
                        payload = await response.read()
                        status = response.status
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    break
                elapsed_ms = (time.perf_counter() - t0) * 1000.0
                if status == 429:
                    counts["rejected"] += 1
                    await asyncio.sleep(
                        json.loads(payload).get("retry_after_ms", 10) / 1000.0
                    )
                    continue
                if status != 200:
                    break
                reply = json.loads(payload)
                replies[reply.get("id")] += 1
                if reply.get("id") != item_id or not is_expected(reply):
                    counts["mismatched"] += 1
                    break
                timing = reply["timing_ms"]
                latencies.append(elapsed_ms)
                models.append(timing["model"])
                overheads.append(elapsed_ms - timing["queue"] - timing["model"])
                break

    timeout = aiohttp.ClientTimeout(total=request_timeout_s)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=clients), timeout=timeout
    ) as session:
        await asyncio.gather(*(client_loop(session) for _ in range(clients)))
    duration_s = time.perf_counter() - started
    return LoadResult(
        clients=clients,
        sent=len(sent_ids),
        lost=len(sent_ids - set(replies)),
        duplicated=sum(n - 1 for n in replies.values() if n > 1)
        + len(set(replies) - sent_ids),
        mismatched=counts["mismatched"],
        rejected_429=counts["rejected"],
        duration_s=duration_s,
        latency_ms=np.array(latencies),
        overhead_ms=np.array(overheads),
        model_ms=np.array(models),
    )
