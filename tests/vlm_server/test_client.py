import asyncio
import time

import pytest
from aiohttp import web

from vlm_server.app import create_app
from vlm_server.backends.fixed_cost import FixedCostScorer, expected_action
from vlm_server.client import (
    AdvisorError,
    AdvisorUnavailable,
    AsyncAdvisorClient,
    BackgroundClient,
    BlockingAdvisorClient,
    advise,
    advise_payload,
    clip_payload,
)

ITEM = {"id": "x", "command": 4, "speed_mps": 10.0}


def scripted_replica(
    statuses: list[int], hits: list[str], name: str
) -> web.Application:
    """Answers with the scripted statuses in turn, then 200."""

    async def handle(request: web.Request) -> web.Response:
        hits.append(name)
        body = await request.json()
        status = statuses.pop(0) if statuses else 200
        if status != 200:
            return web.json_response(
                {"error": "busy", "retry_after_ms": 10},
                status=status,
                headers={"Retry-After": "1"},
            )
        return web.json_response(
            {
                "items": [
                    {"id": i["id"], "ok": True, "action": [0.0, 0.0]}
                    for i in body["items"]
                ]
            }
        )

    app = web.Application()
    app.router.add_post("/v1/advise", handle)
    return app


async def test_retries_on_429_and_503_then_succeeds(aiohttp_server):
    hits: list[str] = []
    server = await aiohttp_server(scripted_replica([429, 503, 429], hits, "a"))
    async with AsyncAdvisorClient(
        str(server.make_url("")).rstrip("/"), backoff_s=0.001
    ) as client:
        started = time.monotonic()
        replies = await client.advise([ITEM])
        assert replies[0]["ok"] and client.retries == 3 and client.in_flight == 0
        assert (
            time.monotonic() - started < 0.9
        )  # used the body's 10 ms hint, not the 1 s header


async def test_client_errors_are_not_retried(aiohttp_server):
    hits: list[str] = []
    server = await aiohttp_server(scripted_replica([400], hits, "a"))
    async with AsyncAdvisorClient(str(server.make_url("")).rstrip("/")) as client:
        with pytest.raises(AdvisorError, match="400"):
            await client.advise([ITEM])
    assert hits == ["a"]


async def test_round_robin_over_replicas_and_failover_from_a_dead_one(
    aiohttp_server, unused_tcp_port
):
    hits: list[str] = []
    a = await aiohttp_server(scripted_replica([], hits, "a"))
    b = await aiohttp_server(scripted_replica([], hits, "b"))
    urls = [str(a.make_url("")).rstrip("/"), str(b.make_url("")).rstrip("/")]
    async with AsyncAdvisorClient(urls) as client:
        for _ in range(4):
            await client.advise([ITEM])
    assert hits == ["a", "b", "a", "b"]
    dead = f"http://127.0.0.1:{unused_tcp_port}"
    async with AsyncAdvisorClient([dead, urls[0]], backoff_s=0.001) as client:
        for _ in range(3):
            assert (await client.advise([ITEM]))[0]["ok"]


async def test_unreachable_server_fails_within_the_deadline(unused_tcp_port):
    async with AsyncAdvisorClient(
        f"http://127.0.0.1:{unused_tcp_port}", timeout_s=0.5, backoff_s=0.01
    ) as client:
        started = time.monotonic()
        with pytest.raises(AdvisorUnavailable, match="no answer from"):
            await client.advise([ITEM])
        assert time.monotonic() - started < 2.0


def test_bad_urls_are_refused():
    with pytest.raises(ValueError, match="http"):
        AsyncAdvisorClient("localhost:8470")


@pytest.fixture
async def server_url(aiohttp_server, server_config):
    config = server_config(
        batching={"max_batch_size": 32, "max_wait_ms": 2.0}, options={"base_ms": 2.0}
    )
    app = create_app(config, clip_backend=FixedCostScorer(base_ms=1.0))
    server = await aiohttp_server(app)
    url = str(server.make_url("")).rstrip("/")
    async with AsyncAdvisorClient(url) as probe:
        for _ in range(200):
            try:
                await probe.advise([ITEM])
                break
            except AdvisorError:
                await asyncio.sleep(0.01)
    return url


async def test_background_client_returns_every_submitted_id_once(server_url, rgb):
    def run() -> list:
        with BackgroundClient(server_url, max_items_per_request=16) as client:
            for i in range(100):
                client.submit(f"a{i}", advise_payload(rgb(), 4, float(i)))
            for i in range(20):
                client.submit(
                    f"c{i}", clip_payload(rgb(), 4, 1.0, (0.4, 0.0)), kind="clip"
                )
            received: list = []
            deadline = time.monotonic() + 10.0
            while client.pending and time.monotonic() < deadline:
                received += client.poll()
                time.sleep(0.005)
            return received

    received = await asyncio.to_thread(run)
    ids = [item_id for item_id, _ in received]
    assert sorted(ids) == sorted(
        [f"a{i}" for i in range(100)] + [f"c{i}" for i in range(20)]
    )
    replies = dict(received)
    assert replies["a42"]["action"] == pytest.approx(list(expected_action(4, 42.0)))
    assert replies["c3"]["bonus"] == pytest.approx(0.1)


async def test_blocking_client_answers_and_names_unreachable_servers(
    server_url, unused_tcp_port, rgb
):
    def run() -> tuple:
        with BlockingAdvisorClient(server_url) as client:
            action = client.advise(rgb(), 2, 30.0)
        started = time.monotonic()
        with pytest.raises(AdvisorUnavailable, match=str(unused_tcp_port)):
            advise(f"http://127.0.0.1:{unused_tcp_port}", None, 4, 1.0, timeout_s=0.5)
        return action, time.monotonic() - started

    action, failure_s = await asyncio.to_thread(run)
    assert action == pytest.approx(expected_action(2, 30.0))
    assert failure_s < 3.0
