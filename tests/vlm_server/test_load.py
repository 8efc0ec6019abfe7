"""Load test: 2,000 requests from 64 concurrent clients, no reply lost, duplicated or mixed up."""

import asyncio
from collections import Counter

import pytest

from vlm_server.app import SERVICES_KEY, create_app
from vlm_server.backends.fixed_cost import expected_action
from vlm_server.client import AsyncAdvisorClient

CLIENTS = 64


@pytest.mark.parametrize(
    ("max_queue_size", "total"),
    [(4096, 2000), (16, 500)],
    ids=["roomy-queue", "tiny-queue-forces-429-retries"],
)
async def test_no_lost_duplicated_or_mixed_replies_under_load(
    aiohttp_server, max_queue_size, total, server_config
):
    config = server_config(
        batching={
            "max_batch_size": 32,
            "max_wait_ms": 2.0,
            "max_queue_size": max_queue_size,
        },
        options={"base_ms": 2.0, "per_item_ms": 0.01},
    )
    app = create_app(config)
    server = await aiohttp_server(app)
    next_index = iter(range(total))
    received: Counter[str] = Counter()
    mismatched: list[str] = []

    async def client_loop(client: AsyncAdvisorClient) -> None:
        for index in next_index:
            speed = float(index % 97)
            command = 1 + index % 6
            reply = (
                await client.advise(
                    [{"id": f"q{index}", "command": command, "speed_mps": speed}]
                )
            )[0]
            received[reply["id"]] += 1
            if reply["id"] != f"q{index}" or reply["action"] != pytest.approx(
                list(expected_action(command, speed))
            ):
                mismatched.append(reply["id"])

    async with AsyncAdvisorClient(
        str(server.make_url("")).rstrip("/"), max_in_flight=CLIENTS, timeout_s=60
    ) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(CLIENTS)))
        retries = client.retries

    assert len(received) == total  # nothing lost
    assert set(received.values()) == {1}  # nothing duplicated
    assert mismatched == []
    backend = app[SERVICES_KEY]["advisor"].backend
    assert sum(backend.batch_sizes) == total  # every item computed exactly once
    assert max(backend.batch_sizes) > 1  # and batched
    if max_queue_size == 16:
        assert retries > 0  # back-pressure was exercised
