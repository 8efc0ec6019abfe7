import asyncio
import logging
import time

import aiohttp
import pytest
from aiohttp import web

from vlm_server.app import METRICS_KEY, SERVICES_KEY, create_app
from vlm_server.backends.fixed_cost import (
    FixedCostAdvisor,
    FixedCostScorer,
    expected_action,
)
from vlm_server.client import advise_payload, clip_payload


def item(i: int, **extra) -> dict:
    return {"id": f"r{i}", "command": 4, "speed_mps": float(i % 50), **extra}


async def ready_client(aiohttp_client, app):
    client = await aiohttp_client(app)
    for _ in range(200):
        if (await client.get("/readyz")).status == 200:
            return client
        await asyncio.sleep(0.01)
    raise AssertionError("server never became ready")


async def test_single_item_in_single_reply_out(aiohttp_client, server_config, rgb):
    client = await ready_client(aiohttp_client, create_app(server_config()))
    response = await client.post(
        "/v1/advise", json={**advise_payload(rgb(), 3, 12.0), "id": "step-1"}
    )
    assert response.status == 200
    reply = await response.json()
    assert reply["id"] == "step-1" and reply["ok"] is True
    assert reply["action"] == pytest.approx(list(expected_action(3, 12.0)))
    assert set(reply["timing_ms"]) == {"queue", "model", "batch_size"}


async def test_list_request_keeps_item_order(aiohttp_client, server_config):
    client = await ready_client(aiohttp_client, create_app(server_config()))
    response = await client.post(
        "/v1/advise", json={"items": [item(i) for i in range(20)]}
    )
    replies = (await response.json())["items"]
    assert [r["id"] for r in replies] == [f"r{i}" for i in range(20)]
    assert [r["action"][0] for r in replies] == pytest.approx(
        [(i % 50) / 100 for i in range(20)]
    )


async def test_clip_endpoint_returns_bonus_margin_and_stats(
    aiohttp_client, server_config, rgb
):
    app = create_app(
        server_config(advisor=None), clip_backend=FixedCostScorer(base_ms=0)
    )
    client = await ready_client(aiohttp_client, app)
    response = await client.post(
        "/v1/clip/score", json={**clip_payload(rgb(), 4, 3.0, (0.8, -0.1)), "id": "c"}
    )
    reply = await response.json()
    assert response.status == 200
    assert reply["bonus"] == pytest.approx(0.2) and set(reply["stats"]) == {
        "count",
        "mean",
        "var",
    }
    assert (
        await client.post("/v1/advise", json=item(0))
    ).status == 404  # no advisor configured


async def test_per_item_backend_errors_do_not_fail_the_request(
    aiohttp_client, server_config
):
    app = create_app(server_config(options={"base_ms": 0, "error_id_prefix": "bad"}))
    client = await ready_client(aiohttp_client, app)
    items = [item(0), {**item(1), "id": "bad-1"}]
    replies = (await (await client.post("/v1/advise", json={"items": items})).json())[
        "items"
    ]
    assert replies[0]["ok"] is True
    assert {k: replies[1][k] for k in ("id", "ok", "error")} == {
        "id": "bad-1",
        "ok": False,
        "error": "injected item error",
    }


async def test_backend_crash_gives_error_replies_without_traceback_and_server_survives(
    aiohttp_client, server_config
):
    app = create_app(server_config(options={"base_ms": 0, "fail_id_prefix": "boom"}))
    client = await ready_client(aiohttp_client, app)
    reply = await (
        await client.post("/v1/advise", json={**item(0), "id": "boom"})
    ).json()
    assert (
        reply["ok"] is False
        and "Traceback" not in reply["error"]
        and "injected" not in reply["error"]
    )
    assert (await client.post("/v1/advise", json=item(1))).status == 200


async def test_readyz_waits_for_the_model_and_requests_get_503_meanwhile(
    aiohttp_client, server_config
):
    app = create_app(server_config(options={"base_ms": 0, "load_delay_s": 0.3}))
    client = await aiohttp_client(app)
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/readyz")).status == 503
    response = await client.post("/v1/advise", json=item(0))
    assert response.status == 503 and "Retry-After" in response.headers
    await asyncio.sleep(0.5)
    assert (await client.get("/readyz")).status == 200


async def test_full_queue_answers_429_with_retry_after(aiohttp_client, server_config):
    config = server_config(
        batching={"max_batch_size": 1, "max_wait_ms": 0, "max_queue_size": 2},
        options={"base_ms": 200},
    )
    client = await ready_client(aiohttp_client, create_app(config))
    requests = [
        asyncio.ensure_future(client.post("/v1/advise", json=item(i))) for i in range(3)
    ]
    await asyncio.sleep(0.1)  # one running, two queued: the queue is full
    refused = await client.post("/v1/advise", json=item(9))
    assert refused.status == 429
    assert int(refused.headers["Retry-After"]) >= 1
    assert "queue is full" in (await refused.json())["error"]
    assert [r.status for r in await asyncio.gather(*requests)] == [200, 200, 200]


async def test_a_request_predicted_to_miss_its_deadline_gets_503_with_retry_after_at_once(
    aiohttp_client, server_config, caplog
):
    """Busy is not dead: a slow model pushes back at once instead of answering 504 late."""
    config = server_config(
        batching={"max_batch_size": 1, "max_wait_ms": 0}, options={"base_ms": 150}
    )
    app = create_app(config)
    client = await ready_client(aiohttp_client, app)
    assert (await client.post("/v1/advise", json=item(0))).status == 200  # measures the rate
    requests = [
        asyncio.ensure_future(client.post("/v1/advise", json=item(i))) for i in range(1, 6)
    ]
    await asyncio.sleep(0.05)  # one running, four queued: ~0.75 s of work ahead
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    refused = await client.post("/v1/advise", json=item(9), headers={"X-Deadline-Ms": "300"})
    assert time.monotonic() - started < 0.3  # answered before its deadline, not at it
    assert refused.status == 503
    body = await refused.json()
    assert "predicted wait" in body["error"] and body["retry_after_ms"] >= 450
    assert int(refused.headers["Retry-After"]) >= 1
    assert [r.status for r in await asyncio.gather(*requests)] == [200] * 5
    metrics = app[METRICS_KEY].registry
    assert metrics.get_sample_value("vlm_server_errors_total", {"backend": "advisor", "kind": "predicted_late"}) == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_deadline_passed_in_the_queue_is_counted_not_logged_as_an_error(
    aiohttp_client, server_config, caplog
):
    config = server_config(batching={"max_batch_size": 1, "max_wait_ms": 0}, options={"base_ms": 200})
    app = create_app(config)
    client = await ready_client(aiohttp_client, app)
    caplog.set_level(logging.DEBUG)
    first = asyncio.ensure_future(client.post("/v1/advise", json=item(0)))
    await asyncio.sleep(0.05)
    late = await client.post("/v1/advise", json=item(1), headers={"X-Deadline-Ms": "50"})
    assert late.status == 504 and (await first).status == 200
    metrics = app[METRICS_KEY].registry
    assert metrics.get_sample_value("vlm_server_errors_total", {"backend": "advisor", "kind": "deadline"}) == 1
    ours = [r for r in caplog.records if r.name.startswith("vlm_server")]
    assert [r.getMessage() for r in ours if r.levelno >= logging.INFO] == []


async def test_a_request_larger_than_the_queue_answers_413_naming_the_limit(aiohttp_client, server_config):
    config = server_config(batching={"max_batch_size": 2, "max_wait_ms": 0, "max_queue_size": 3})
    client = await ready_client(aiohttp_client, create_app(config))
    response = await client.post("/v1/advise", json={"items": [item(i) for i in range(4)]})
    assert response.status == 413 and "Retry-After" not in response.headers
    body = await response.json()
    assert body["field"] == "items" and "at most 3 (max_queue_size)" in body["error"]


async def test_requests_are_refused_while_draining(aiohttp_client, server_config):
    from vlm_server.app import DRAINING_KEY

    app = create_app(server_config())
    client = await ready_client(aiohttp_client, app)
    app[DRAINING_KEY].set()
    response = await client.post("/v1/advise", json=item(0))
    assert response.status == 503 and response.headers["Retry-After"] == "1"
    assert "shutting down" in (await response.json())["error"]


def test_config_refuses_a_per_request_limit_above_a_queue(server_config):
    from pydantic import ValidationError

    expected = r"max_items_per_request \(100\) exceeds advisor.batching.max_queue_size \(10\)"
    with pytest.raises(ValidationError, match=expected):
        server_config(max_items_per_request=100, batching={"max_queue_size": 10})
    assert server_config(batching={"max_queue_size": 10}).max_items_per_request == 1024  # the default is not checked


async def test_deadline_answers_504_and_the_server_keeps_serving(
    aiohttp_client, server_config
):
    config = server_config(request_timeout_ms=100, options={"base_ms": 300})
    client = await ready_client(aiohttp_client, create_app(config))
    response = await client.post("/v1/advise", json=item(0))
    assert response.status == 504 and "deadline" in (await response.json())["error"]
    short = await client.post(
        "/v1/advise", json=item(1), headers={"X-Deadline-Ms": "20"}
    )
    assert short.status == 504
    await asyncio.sleep(0.7)
    fast = create_app(server_config(request_timeout_ms=2000, options={"base_ms": 0}))
    fast_client = await ready_client(aiohttp_client, fast)
    assert (await fast_client.post("/v1/advise", json=item(2))).status == 200


async def test_token_is_required_when_configured_but_probes_stay_open(
    aiohttp_client, server_config
):
    client = await ready_client(
        aiohttp_client, create_app(server_config(token="s3cret-token"))
    )
    missing = await client.post("/v1/advise", json=item(0))
    assert missing.status == 401 and (await missing.json())["field"] == "Authorization"
    wrong = {"Authorization": "Bearer nope-nope"}
    assert (await client.post("/v1/advise", json=item(0), headers=wrong)).status == 401
    right = {"Authorization": "Bearer s3cret-token"}
    assert (await client.post("/v1/advise", json=item(0), headers=right)).status == 200
    assert (await client.get("/metrics")).status == 401
    assert (await client.get("/healthz")).status == 200


class _BrokenAdvisor:
    def load(self) -> None:
        raise RuntimeError("weights /models/x.pt not found")

    def advise_batch(self, items: list) -> list:
        return []


async def test_readyz_tells_loading_from_a_failed_load(aiohttp_client, server_config):
    loading = await aiohttp_client(
        create_app(server_config(options={"base_ms": 0, "load_delay_s": 0.3}))
    )
    reply = await (await loading.get("/readyz")).json()
    assert reply == {"status": "loading", "backends": {"advisor": "loading"}}

    failed = await aiohttp_client(
        create_app(server_config(), advisor_backend=_BrokenAdvisor())
    )
    for _ in range(100):
        response = await failed.get("/readyz")
        if (await response.json())["status"] != "loading":
            break
        await asyncio.sleep(0.01)
    reply = await response.json()
    assert response.status == 503 and reply["status"] == "failed"
    assert "weights /models/x.pt not found" in reply["backends"]["advisor"]
    refused = await failed.post("/v1/advise", json=item(0))
    assert refused.status == 503 and "failed to load" in (await refused.json())["error"]
    assert "Retry-After" not in refused.headers  # retrying cannot help


def test_non_loopback_host_without_token_is_refused(server_config):
    with pytest.raises(ValueError, match="token"):
        server_config(host="0.0.0.0")
    assert server_config(host="0.0.0.0", token="long-enough-token").host == "0.0.0.0"


async def test_metrics_expose_requests_batches_queue_and_latency(
    aiohttp_client, server_config
):
    client = await ready_client(aiohttp_client, create_app(server_config()))
    await client.post("/v1/advise", json={"items": [item(i) for i in range(5)]})
    await client.post("/v1/advise", json={"id": "x"})
    text = await (await client.get("/metrics")).text()
    for name in (
        'vlm_server_requests_total{route="/v1/advise",status="200"} 1.0',
        'vlm_server_requests_total{route="/v1/advise",status="400"} 1.0',
        "vlm_server_queue_depth",
        "vlm_server_batch_size_bucket",
        "vlm_server_queue_wait_seconds_bucket",
        "vlm_server_request_seconds_bucket",
        'vlm_server_items_total{backend="advisor"} 5.0',
    ):
        assert name in text


async def test_shutdown_drains_in_flight_requests(server_config):
    """Stopping the server mid-load still answers every accepted request."""
    backend = FixedCostAdvisor(base_ms=100, per_item_ms=0)
    app = create_app(
        server_config(batching={"max_batch_size": 4, "max_wait_ms": 0}),
        advisor_backend=backend,
    )
    runner = web.AppRunner(app, shutdown_timeout=5.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    async with aiohttp.ClientSession() as session:
        while (await session.get(f"http://127.0.0.1:{port}/readyz")).status != 200:
            await asyncio.sleep(0.01)

        async def post(i: int) -> tuple[int, dict]:
            async with session.post(
                f"http://127.0.0.1:{port}/v1/advise", json=item(i)
            ) as response:
                return response.status, await response.json()

        requests = [asyncio.ensure_future(post(i)) for i in range(12)]
        batcher = app[SERVICES_KEY]["advisor"].batcher
        for _ in range(
            500
        ):  # wait until the server has accepted all 12: some running, the rest queued
            if batcher.depth + sum(backend.batch_sizes) == 12 and batcher.depth > 0:
                break
            await asyncio.sleep(0.01)
        await runner.cleanup()
        responses = await asyncio.gather(*requests)
        assert [status for status, _ in responses] == [200] * 12
        assert sorted(reply["id"] for _, reply in responses) == sorted(
            f"r{i}" for i in range(12)
        )
    assert sum(backend.batch_sizes) == 12
