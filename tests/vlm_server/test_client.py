import asyncio
import time

import pytest
from aiohttp import web

from vlm_server.app import METRICS_KEY, create_app
from vlm_server.backends.fixed_cost import FixedCostScorer, expected_action
from vlm_server.client import (
    AdvisorBusy,
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


# --------------------------------------------------------------------- busy is not dead


def collect(client: BackgroundClient, count: int, within_s: float = 10.0) -> dict[str, dict]:
    """Poll until ``count`` replies arrived (bounded); fails on a repeated id."""
    replies: dict[str, dict] = {}
    deadline = time.monotonic() + within_s
    while len(replies) < count and time.monotonic() < deadline:
        for item_id, reply in client.poll(wait_s=0.05):
            assert item_id not in replies, f"{item_id} came back twice"
            replies[item_id] = reply
    return replies


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def counting_replica(state: dict) -> web.Application:
    """Counts concurrent requests; answers 503 + retry hint while ``state["busy"]``, else 200 after ``delay_s``."""
    state.setdefault("active", 0)
    state.setdefault("peak", 0)
    state.setdefault("answers", [])

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        if state.get("busy"):
            state["answers"].append(503)
            return web.json_response(
                {"error": "busy", "retry_after_ms": state.get("retry_after_ms", 20)},
                status=503,
                headers={"Retry-After": "1"},
            )
        state["active"] += 1
        state["peak"] = max(state["peak"], state["active"])
        try:
            await asyncio.sleep(state.get("delay_s", 0.0))
        finally:
            state["active"] -= 1
        state["answers"].append(200)
        items = [{"id": i["id"], "ok": True, "action": [0.0, 0.0]} for i in body["items"]]
        return web.json_response({"items": items})

    app = web.Application()
    app.router.add_post("/v1/advise", handle)
    app.router.add_get("/healthz", healthz)
    return app


def hanging_replica(healthz_answers: bool) -> web.Application:
    """Accepts requests and never answers them (sleeps until the client hangs up)."""

    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(60)  # the test server cancels it when the client leaves
        return web.json_response({})

    async def probe(request: web.Request) -> web.Response:
        if not healthz_answers:
            await hang(request)
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_post("/v1/advise", hang)
    app.router.add_get("/healthz", probe)
    return app


def url_of(server) -> str:
    return str(server.make_url("")).rstrip("/")


async def test_busy_answers_for_longer_than_timeout_s_are_waited_for_not_unavailable(aiohttp_server):
    """Four 503/429s asking for 0.2 s each outlast timeout_s=0.3, yet the item succeeds."""
    hits: list[str] = []
    server = await aiohttp_server(scripted_replica([503, 429, 503, 429], hits, "a"))
    state = {"busy": True, "retry_after_ms": 200}
    slow = await aiohttp_server(counting_replica(state))

    async with AsyncAdvisorClient(url_of(server), timeout_s=0.3, backoff_s=0.001) as client:
        assert (await client.advise([ITEM]))[0]["ok"]
        assert client.busy_answers == 4 and client.timeouts == 0

    def run() -> tuple[dict, object]:
        with BackgroundClient(url_of(slow), timeout_s=0.3, max_retries=0) as client:
            client.submit("a", dict(ITEM))
            time.sleep(0.7)  # three or so busy answers, 0.2 s apart
            state["busy"] = False
            return collect(client, 1), client.stats()

    replies, stats = await asyncio.to_thread(run)
    assert replies["a"]["ok"] is True and "unavailable" not in replies["a"]
    assert stats.busy_answers >= 2 and stats.unavailable_items == 0 and stats.busy_items == 0


async def test_a_closed_port_is_unavailable_for_every_queued_item(unused_tcp_port):
    def run() -> tuple[dict, object]:
        url = f"http://127.0.0.1:{unused_tcp_port}"
        with BackgroundClient(url, timeout_s=0.5, max_retries=2, max_items_per_request=2) as client:
            for i in range(6):
                client.submit(f"i{i}", dict(ITEM))
            return collect(client, 6), client.stats()

    replies, stats = await asyncio.to_thread(run)
    assert sorted(replies) == [f"i{i}" for i in range(6)]
    assert all(r["ok"] is False and r["unavailable"] is True and "busy" not in r for r in replies.values())
    assert stats.unavailable_items == 6 and stats.busy_answers == 0


async def test_a_server_that_takes_requests_but_answers_only_its_probe_is_busy_not_dead(aiohttp_server):
    server = await aiohttp_server(hanging_replica(healthz_answers=True))
    async with AsyncAdvisorClient(url_of(server), timeout_s=0.2, busy_timeout_s=0.8) as client:
        started = time.monotonic()
        with pytest.raises(AdvisorBusy, match="busy_timeout_s") as error:
            await client.advise([ITEM])
        assert not isinstance(error.value, AdvisorUnavailable)
        assert client.timeouts >= 1 and time.monotonic() - started < 3.0

    def run() -> tuple[dict, object]:
        with BackgroundClient(url_of(server), timeout_s=0.2, busy_timeout_s=0.8) as client:
            client.submit("a", dict(ITEM))
            return collect(client, 1), client.stats()

    replies, stats = await asyncio.to_thread(run)
    assert replies["a"]["ok"] is False and replies["a"]["busy"] is True and "unavailable" not in replies["a"]
    assert stats.busy_items == 1 and stats.unavailable_items == 0 and stats.timeouts >= 1


async def test_a_server_that_hangs_entirely_is_unavailable(aiohttp_server):
    server = await aiohttp_server(hanging_replica(healthz_answers=False))

    def run() -> dict:
        with BackgroundClient(url_of(server), timeout_s=0.3, probe_timeout_s=0.2) as client:
            client.submit("a", dict(ITEM))
            return collect(client, 1)

    started = time.monotonic()
    reply = (await asyncio.to_thread(run))["a"]
    assert reply["ok"] is False and reply["unavailable"] is True and "busy" not in reply
    assert time.monotonic() - started < 5.0


async def test_the_in_flight_cap_is_honoured_and_submit_never_blocks(aiohttp_server):
    state = {"delay_s": 0.05}
    server = await aiohttp_server(counting_replica(state))

    def run() -> tuple[dict, float, object]:
        with BackgroundClient(url_of(server), max_in_flight_requests=2, max_items_per_request=3) as client:
            started = time.monotonic()
            for i in range(30):
                client.submit(f"i{i}", dict(ITEM))
            submit_s = time.monotonic() - started
            early = client.stats()
            return collect(client, 30), submit_s, early

    replies, submit_s, early = await asyncio.to_thread(run)
    assert sorted(replies) == sorted(f"i{i}" for i in range(30))
    assert all(r["ok"] for r in replies.values())
    assert state["peak"] == 2  # used, and never exceeded
    assert submit_s < 0.5 and early.in_flight_requests <= 2 and early.allowed_in_flight == 2


async def test_busy_answers_lower_the_pace_and_successes_raise_it_again(aiohttp_server):
    state = {"busy": True, "retry_after_ms": 30, "delay_s": 0.005}
    server = await aiohttp_server(counting_replica(state))

    def run() -> tuple:
        with BackgroundClient(url_of(server), max_in_flight_requests=4, max_items_per_request=4) as client:
            start = client.stats()  # before any request left: the configured pace
            for i in range(80):
                client.submit(f"i{i}", dict(ITEM))
            deadline = time.monotonic() + 10.0
            while client.stats().busy_answers < 12 and time.monotonic() < deadline:
                time.sleep(0.01)
            slowed = client.stats()
            state["busy"] = False
            replies = collect(client, 80)
            return start, slowed, replies, client.stats()

    start, slowed, replies, final = await asyncio.to_thread(run)
    assert start.allowed_in_flight == 4 and start.items_per_request == 4
    assert slowed.allowed_in_flight == 1 and slowed.items_per_request < 4  # halved, then halved again
    assert slowed.queued_items > 0  # the rest waits in the outbox
    assert sorted(replies) == sorted(f"i{i}" for i in range(80))
    assert all(r["ok"] for r in replies.values())
    # grown back on the successes (items first, then requests in flight; how far depends on how
    # many requests were left to succeed)
    assert final.items_per_request > slowed.items_per_request
    assert final.unavailable_items == 0 and final.busy_items == 0


async def test_items_are_answered_busy_once_busy_timeout_s_has_passed(aiohttp_server):
    state = {"busy": True, "retry_after_ms": 50}
    server = await aiohttp_server(counting_replica(state))

    def run() -> tuple[dict, object]:
        options = {"max_in_flight_requests": 1, "max_items_per_request": 1, "busy_timeout_s": 0.5}
        with BackgroundClient(url_of(server), timeout_s=0.2, **options) as client:
            for i in range(5):
                client.submit(f"i{i}", dict(ITEM))
            return collect(client, 5, within_s=5.0), client.stats()

    replies, stats = await asyncio.to_thread(run)
    assert sorted(replies) == [f"i{i}" for i in range(5)]  # the unsent ones too
    assert all(r["ok"] is False and r["busy"] is True and "unavailable" not in r for r in replies.values())
    assert stats.busy_items == 5 and stats.queued_items == 0 and stats.unavailable_items == 0


async def test_a_503_without_a_retry_hint_is_a_refusal_not_busy(aiohttp_server):
    async def failed(request: web.Request) -> web.Response:
        return web.json_response({"error": "advisor backend failed to load (see /readyz)"}, status=503)

    app = web.Application()
    app.router.add_post("/v1/advise", failed)
    server = await aiohttp_server(app)
    async with AsyncAdvisorClient(url_of(server)) as client:
        with pytest.raises(AdvisorError, match="failed to load") as error:
            await client.advise([ITEM])
    assert not isinstance(error.value, AdvisorBusy | AdvisorUnavailable)


async def test_the_blocking_client_waits_for_a_busy_server(aiohttp_server):
    hits: list[str] = []
    server = await aiohttp_server(scripted_replica([503, 503, 429], hits, "a"))

    def run() -> tuple[float, float]:
        with BlockingAdvisorClient(url_of(server), timeout_s=1.0) as client:
            return client.advise(None, 4, 1.0)

    assert await asyncio.to_thread(run) == (0.0, 0.0)
    assert hits == ["a"] * 4


async def test_a_slow_real_server_under_load_pushes_back_and_every_item_is_answered(aiohttp_server, server_config):
    """The measured problem end to end: a slow model, short client deadlines, more items than it
    can serve in one deadline. Refusals (503 + Retry-After) slow the client down; nothing is
    reported unavailable and every id comes back once."""
    config = server_config(batching={"max_batch_size": 4, "max_wait_ms": 1.0}, options={"base_ms": 60.0})
    app = create_app(config)
    server = await aiohttp_server(app)
    url = url_of(server)
    async with AsyncAdvisorClient(url, busy_timeout_s=10.0) as warm:
        await warm.advise([ITEM])  # ready, and one batch measured

    def run() -> tuple[dict, object]:
        options = {"max_in_flight_requests": 4, "max_items_per_request": 8, "busy_timeout_s": 30.0}
        with BackgroundClient(url, timeout_s=0.25, max_retries=2, **options) as client:
            for i in range(60):
                client.submit(f"i{i}", dict(ITEM))
            return collect(client, 60, within_s=30.0), client.stats()

    replies, stats = await asyncio.to_thread(run)
    assert sorted(replies) == sorted(f"i{i}" for i in range(60))
    assert all(r["ok"] for r in replies.values()), [r for r in replies.values() if not r["ok"]][:2]
    assert stats.unavailable_items == 0 and stats.busy_answers > 0
    refused = app[METRICS_KEY].registry.get_sample_value(
        "vlm_server_errors_total", {"backend": "advisor", "kind": "predicted_late"}
    )
    assert refused and refused > 0  # pushed back at once rather than queueing to time out
