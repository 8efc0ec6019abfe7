import asyncio
import base64
import io

import numpy as np
import pytest
from aiohttp import web
from PIL import Image

from vlm_server.app import create_app
from vlm_server.backends.openai_compat import OpenAICompatAdvisor
from vlm_server.client import advise_payload


def fake_upstream(max_concurrency_seen: list[int]) -> web.Application:
    """A chat-completions server answering from the image's mean colour; 'broken' prompts fail."""
    state = {"active": 0}

    async def chat(request: web.Request) -> web.Response:
        state["active"] += 1
        max_concurrency_seen.append(state["active"])
        try:
            body = await request.json()
            assert request.headers["Authorization"] == "Bearer upstream-key"
            assert body["model"] == "tiny-vlm" and body["temperature"] == 0.0
            content = body["messages"][0]["content"]
            url = content[0]["image_url"]["url"]
            assert url.startswith("data:image/png;base64,")
            image = np.asarray(
                Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
            )
            prompt = content[1]["text"]
            await asyncio.sleep(0.02)
            if "12.0 m/s" in prompt:
                return web.json_response({"error": "overloaded"}, status=500)
            if "7.0 m/s" in prompt:
                text = "I am not sure."
            else:
                text = f'{{"steer": 0.1, "brake": 0.0, "throttle": {image.mean() / 255:.3f}}}'
            return web.json_response(
                {"choices": [{"message": {"role": "assistant", "content": text}}]}
            )
        finally:
            state["active"] -= 1

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def test_upstream_advisor_pools_bounds_and_reports_per_item_errors(
    aiohttp_client, aiohttp_server, monkeypatch, server_config, rgb
):
    monkeypatch.setenv("UPSTREAM_KEY", "upstream-key")
    seen: list[int] = []
    upstream = await aiohttp_server(fake_upstream(seen))
    advisor = OpenAICompatAdvisor(
        base_url=f"http://127.0.0.1:{upstream.port}/v1",
        model="tiny-vlm",
        api_key_env="UPSTREAM_KEY",
        max_concurrency=3,
    )
    client = await aiohttp_client(create_app(server_config(), advisor_backend=advisor))
    while (await client.get("/readyz")).status != 200:
        await asyncio.sleep(0.01)
    grey = np.full((16, 16, 3), 128, np.uint8)
    items = [
        {**advise_payload(grey, 4, 3.0, image_format="png"), "id": f"g{i}"}
        for i in range(10)
    ]
    items.append({**advise_payload(rgb(16, 16), 4, 12.0), "id": "upstream-fails"})
    items.append({**advise_payload(rgb(16, 16), 4, 7.0), "id": "unparseable"})
    replies = (await (await client.post("/v1/advise", json={"items": items})).json())[
        "items"
    ]
    for reply in replies[:10]:
        assert reply["ok"] is True and reply["action"] == pytest.approx(
            [128 / 255, 0.1], abs=1e-3
        )
    assert replies[10]["ok"] is False and "HTTP 500" in replies[10]["error"]
    assert replies[11]["ok"] is False and "unparseable" in replies[11]["error"]
    assert replies[11]["text"] == "I am not sure."
    assert max(seen) <= 3
    assert advisor.parse_failures == 1


async def test_unreachable_upstream_is_an_item_error_not_a_crash(
    aiohttp_client, unused_tcp_port, server_config
):
    advisor = OpenAICompatAdvisor(
        base_url=f"http://127.0.0.1:{unused_tcp_port}/v1", model="m", timeout_s=1.0
    )
    client = await aiohttp_client(create_app(server_config(), advisor_backend=advisor))
    while (await client.get("/readyz")).status != 200:
        await asyncio.sleep(0.01)
    reply = await (
        await client.post(
            "/v1/advise", json={"id": "x", "command": 4, "speed_mps": 1.0}
        )
    ).json()
    assert reply["ok"] is False and "upstream request failed" in reply["error"]


def test_missing_api_key_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ValueError, match="NO_SUCH_KEY_VAR"):
        OpenAICompatAdvisor(
            base_url="http://x/v1", model="m", api_key_env="NO_SUCH_KEY_VAR"
        )
