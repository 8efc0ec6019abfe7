"""Every malformed or hostile request gets a clear 4xx, and the server keeps serving."""

import asyncio
import base64
import gzip
import io
import json
import logging
import socket
import struct
import zlib

import aiohttp
import numpy as np
import pytest
from aiohttp import web
from PIL import Image

from vlm_server.app import create_app
from vlm_server.backends.fixed_cost import FixedCostScorer
from vlm_server.images import encode_image
from vlm_server.keys import METRICS_KEY

GOOD = {"id": "ok", "command": 4, "speed_mps": 1.0}


def rgb(height: int = 8, width: int = 8) -> np.ndarray:
    return np.random.default_rng(0).integers(
        0, 256, size=(height, width, 3), dtype=np.uint8
    )


def png_b64(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def raw_image(**changes) -> dict:
    return {**encode_image(rgb()), **changes}


@pytest.fixture
async def client(aiohttp_client, server_config):
    config = server_config(
        max_body_bytes=64 * 1024,
        max_items_per_request=16,
        max_image_side=64,
        body_read_timeout_ms=300,
    )
    clip = FixedCostScorer(base_ms=0)
    clip.image_hw = (8, 8)
    client = await aiohttp_client(create_app(config, clip_backend=clip))
    while (await client.get("/readyz")).status != 200:
        await asyncio.sleep(0.01)
    yield client
    # whatever happened, the server still answers a good request
    response = await client.post("/v1/advise", json=GOOD)
    assert response.status == 200 and (await response.json())["ok"] is True


async def post_raw(
    client,
    body: str | bytes,
    content_type: str = "application/json",
    path: str = "/v1/advise",
):
    return await client.post(path, data=body, headers={"Content-Type": content_type})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"id": "a", "command": 4,', "body"),
        ('{"id": "a", "command": 4, "speed_mps": NaN}', "body"),
        ('{"id": "a", "command": 4, "speed_mps": Infinity}', "body"),
        ('{"id": "a", "command": 4, "speed_mps": 1e999}', "speed_mps"),
        ('{"id": "a", "command": 4, "speed_mps": "fast"}', "speed_mps"),
        ('{"id": "a", "command": 0, "speed_mps": 1.0}', "command"),
        ('{"id": "a", "command": 7, "speed_mps": 1.0}', "command"),
        ('{"id": "a", "command": "4", "speed_mps": 1.0}', "command"),
        ('{"id": "a", "command": 4.5, "speed_mps": 1.0}', "command"),
        ('{"id": "", "command": 4, "speed_mps": 1.0}', "id"),
        ('{"command": 4, "speed_mps": 1.0}', "id"),
        ('{"id": "a", "command": 4, "speed_mps": 1.0, "sped": 2}', "sped"),
        ('{"items": []}', "items"),
        (
            '{"items": [{"id": "a", "command": 4, "speed_mps": 1.0}, {"id": "b", "command": 4}]}',
            "items[1].speed_mps",
        ),
        ("[1, 2, 3]", "body"),
        ('"hello"', "body"),
        (b"\xff\xfe\x00garbage", "body"),
        ('{"id": "a", "command": 4, "speed_mps": true}', "speed_mps"),
        ('{"id": "a", "command": 4, "speed_mps": "1.5"}', "speed_mps"),
        pytest.param(
            '{"id": "a", "command": 4, "speed_mps": 1.0, "state": '
            + "[" * 20_000
            + "]" * 20_000
            + "}",
            "body",
            id="nested-20000-deep",
        ),
        (json.dumps({"items": [GOOD, {**GOOD, "id": "b"}, GOOD]}), "items[2].id"),
    ],
)
async def test_bad_json_is_400_naming_the_field(client, body, field):
    response = await post_raw(client, body)
    assert response.status == 400
    reply = await response.json()
    assert reply["field"] == field, reply
    assert "Traceback" not in json.dumps(reply)


@pytest.mark.parametrize(
    ("image", "message"),
    [
        (raw_image(data=raw_image()["data"][:-8]), "truncated"),
        (raw_image(data="!!!!" + raw_image()["data"][4:]), "base64"),
        (raw_image(dtype="float32"), "uint8"),
        (raw_image(shape=[8, 8, 4]), "[H, W, 3]"),
        (raw_image(shape=[4, 8, 3]), "needs"),
        ({"format": "raw", "data": raw_image()["data"]}, "shape"),
        ({"format": "png", "data": png_b64(rgb())[:120]}, "PNG"),
        ({"format": "png", "data": png_b64(np.zeros((8, 8, 4), np.uint8))}, "RGBA"),
        ({"format": "png", "data": png_b64(np.zeros((8, 8), np.uint16))}, "8-bit RGB"),
        ({"format": "png", "data": png_b64(rgb(80, 8))}, "1..64"),
        ({"format": "jpeg", "data": "AAAA"}, "format"),
        (encode_image(rgb(72, 8)), "1..64"),
    ],
)
async def test_bad_images_are_400(client, image, message):
    response = await client.post("/v1/advise", json={**GOOD, "image": image})
    assert response.status == 400
    reply = await response.json()
    assert reply["field"].startswith("image")
    assert message in reply["error"], reply


def png_claiming(height: int, width: int) -> str:
    """A PNG with only a header (IHDR) claiming ``height x width`` RGB pixels and no data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")).decode()


def png_with_corrupt_pixels() -> str:
    raw = bytearray(base64.b64decode(png_b64(rgb())))
    start = raw.index(b"IDAT") + 4
    raw[start:start + 16] = bytes(16)  # the compressed pixel stream, not a header
    return base64.b64encode(bytes(raw)).decode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (base64.b64encode(b"GIF89a" + bytes(40)).decode(), "no complete PNG header"),
        (png_claiming(100_000, 100_000), "decompression bomb"),  # PIL refuses it before our size check
        (png_claiming(8, 8), "cannot load"),  # a header and no pixels
        (png_with_corrupt_pixels(), "decodable PNG"),
    ],
    ids=["not-a-png", "bomb-header", "no-pixel-data", "corrupt-pixel-data"],
)
@pytest.mark.parametrize("batched", [False, True], ids=["item", "batch"])
async def test_png_data_pil_cannot_decode_is_400_naming_the_field(client, data, message, batched):
    item = {**GOOD, "image": {"format": "png", "data": data}}
    response = await client.post("/v1/advise", json={"items": [item]} if batched else item)
    assert response.status == 400
    reply = await response.json()
    assert reply["field"] == ("items[0].image" if batched else "image"), reply
    assert message in reply["error"], reply


async def test_a_bug_while_decoding_a_png_is_500_and_logged_with_its_traceback(client, monkeypatch, caplog):
    def broken_open(*args, **kwargs):
        raise KeyError("a bug of ours, not the client's data")

    monkeypatch.setattr(Image, "open", broken_open)
    caplog.set_level(logging.ERROR)
    response = await client.post("/v1/advise", json={**GOOD, "image": encode_image(rgb(), "png")})
    assert response.status == 500
    assert await response.json() == {"error": "internal server error"}  # no traceback to the client
    logged = [r for r in caplog.records if r.exc_info and r.exc_info[0] is KeyError]
    assert logged and "unhandled error on POST /v1/advise" in logged[0].getMessage()


async def test_image_of_the_wrong_size_for_the_backend_is_400(client):
    body = {**GOOD, "image": encode_image(rgb(16, 16)), "action": [0.1, 0.0]}
    response = await client.post("/v1/clip/score", json=body)
    assert response.status == 400
    assert "expects 8x8" in (await response.json())["error"]
    body["image"] = encode_image(rgb(8, 8), "png")
    assert (await client.post("/v1/clip/score", json=body)).status == 200


@pytest.mark.parametrize(
    "action",
    [
        [0.1],
        [0.1, 0.2, 0.3],
        [1.5, 0.0],
        [0.0, -1.01],
        ["a", 0.0],
        [True, 0.0],
        ["0.5", 0.0],
    ],
)
async def test_bad_clip_actions_are_400(client, action):
    body = {**GOOD, "image": encode_image(rgb()), "action": action}
    response = await client.post("/v1/clip/score", json=body)
    assert response.status == 400
    assert (await response.json())["field"].startswith("action")


async def test_wrong_content_type_is_415(client):
    response = await post_raw(client, json.dumps(GOOD), content_type="text/plain")
    assert response.status == 415
    assert "application/json" in (await response.json())["error"]


async def test_oversized_body_is_413(client):
    response = await client.post(
        "/v1/advise", json={**GOOD, "state": {"pad": "x" * 100_000}}
    )
    assert response.status == 413


async def test_oversized_chunked_body_is_413(client):
    async def chunks():
        yield b'{"id": "a", "state": {"pad": "'
        for _ in range(20):
            yield b"x" * 10_000
        yield b'"}}'

    response = await client.post(
        "/v1/advise", data=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status == 413


async def test_too_many_items_is_413(client):
    response = await client.post("/v1/advise", json={"items": [GOOD] * 17})
    assert response.status == 413 and (await response.json())["field"] == "items"


async def test_wrong_method_and_unknown_path_are_json_4xx(client):
    response = await client.get("/v1/advise")
    assert response.status == 405 and "error" in await response.json()
    response = await client.post("/v2/nothing", json=GOOD)
    assert response.status == 404 and "error" in await response.json()


async def test_slow_client_gets_408_and_others_are_served_meanwhile(client):
    reader, writer = await asyncio.open_connection(
        client.server.host, client.server.port
    )
    body = json.dumps(GOOD).encode()
    writer.write(
        b"POST /v1/advise HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body[:5]
    )
    await writer.drain()
    assert (
        await client.post("/v1/advise", json=GOOD)
    ).status == 200  # not blocked by the slow one
    status_line = await asyncio.wait_for(reader.readline(), timeout=5.0)
    assert b" 408 " in status_line
    writer.close()


async def test_client_disconnecting_mid_body_and_mid_request_does_not_hurt(client):
    # 1. gone halfway through the body
    _, writer = await asyncio.open_connection(client.server.host, client.server.port)
    writer.write(
        b'POST /v1/advise HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"id'
    )
    await writer.drain()
    writer.close()
    # 2. gone while its item is queued/being computed
    _, writer = await asyncio.open_connection(client.server.host, client.server.port)
    body = json.dumps({"items": [GOOD] * 8}).encode()
    writer.write(
        b"POST /v1/advise HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    writer.close()
    await asyncio.sleep(0.1)
    responses = await asyncio.gather(
        *(client.post("/v1/advise", json={**GOOD, "id": str(i)}) for i in range(10))
    )
    assert [r.status for r in responses] == [200] * 10
    assert (await client.get("/healthz")).status == 200


async def test_bad_deadline_header_is_400(client):
    response = await client.post(
        "/v1/advise", json=GOOD, headers={"X-Deadline-Ms": "soon"}
    )
    assert response.status == 400


@pytest.mark.parametrize(
    ("method", "path", "headers", "data", "status", "field"),
    [
        (
            "POST",
            "/v1/advise",
            {"Content-Type": "text/plain"},
            json.dumps(GOOD),
            415,
            "Content-Type",
        ),
        (
            "POST",
            "/v1/advise",
            {},
            json.dumps({**GOOD, "state": {"pad": "x" * 100_000}}),
            413,
            "body",
        ),
        (
            "POST",
            "/v1/advise",
            {"X-Deadline-Ms": "soon"},
            json.dumps(GOOD),
            400,
            "X-Deadline-Ms",
        ),
        (
            "POST",
            "/v1/advise",
            {"Content-Encoding": "gzip"},
            b"not gzip at all",
            400,
            "Content-Encoding",
        ),
        ("POST", "/v1/advise?batch=1", {}, json.dumps(GOOD), 400, "batch"),
        ("GET", "/healthz?verbose=1", {}, None, 400, "verbose"),
        ("PUT", "/v1/advise", {}, json.dumps(GOOD), 405, "method"),
        ("POST", "/v2/nothing", {}, json.dumps(GOOD), 404, "path"),
    ],
    ids=[
        "content-type",
        "body-too-big",
        "deadline-header",
        "corrupt-gzip",
        "query-on-advise",
        "query-on-healthz",
        "wrong-method",
        "unknown-path",
    ],
)
async def test_transport_errors_name_the_header_or_parameter(
    client, method, path, headers, data, status, field
):
    headers = {"Content-Type": "application/json", **headers}
    response = await client.request(method, path, data=data, headers=headers)
    assert response.status == status
    reply = await response.json()
    assert reply["field"] == field, reply
    assert "Traceback" not in reply["error"]


async def test_routing_errors_say_what_would_work(client):
    reply = await (await client.get("/v2/nothing")).json()
    assert "POST /v1/advise" in reply["error"] and "GET /readyz" in reply["error"]
    response = await client.put("/v1/advise", json=GOOD)
    assert "use POST" in (await response.json())["error"]
    assert response.headers["Allow"] == "POST"


async def test_a_corrupt_gzip_body_leaves_the_connection_usable(client):
    """The server reads the raw body to its end before decoding, so keep-alive still works."""
    for _ in range(3):
        response = await client.post(
            "/v1/advise",
            data=b"not gzip",
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )
        assert response.status == 400
        assert (await client.post("/v1/advise", json=GOOD)).status == 200


GZIPPED = gzip.compress(json.dumps(GOOD).encode())


@pytest.mark.parametrize(
    ("encoding", "body", "status", "message"),
    [
        ("gzip", GZIPPED[:-12], 400, "Content-Encoding gzip: the body ends before its gzip stream does"),
        ("gzip", GZIPPED[:10], 400, "Content-Encoding gzip: the body ends before its gzip stream does"),
        ("deflate", b"\xff\xff\xff\xff", 400, "Content-Encoding deflate: the body is not valid deflate"),
        ("zstd", json.dumps(GOOD).encode(), 400, "Content-Encoding 'zstd' is not supported"),
        ("br", json.dumps(GOOD).encode(), 400, "Content-Encoding 'br' is not supported"),
        ("gzip, gzip", gzip.compress(GZIPPED), 400, "stacked encodings are not supported"),
        ("gzip", gzip.compress(b" " * 70_000), 413, "decodes to more than the limit of 65536 bytes"),
    ],
    ids=["truncated", "header-only", "corrupt-deflate", "zstd", "br", "stacked", "bomb"],
)
async def test_bad_encodings_are_answered_naming_the_encoding(client, encoding, body, status, message):
    response = await client.post(
        "/v1/advise", data=body, headers={"Content-Type": "application/json", "Content-Encoding": encoding}
    )
    assert response.status == status
    reply = await response.json()
    assert reply["field"] == "Content-Encoding" and message in reply["error"], reply


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "deflate", "identity"])
async def test_encoded_bodies_are_served(client, encoding):
    body = json.dumps(GOOD).encode()
    encoded = {"gzip": gzip.compress, "x-gzip": gzip.compress, "deflate": zlib.compress}.get(encoding, bytes)(body)
    response = await client.post(
        "/v1/advise", data=encoded, headers={"Content-Type": "application/json", "Content-Encoding": encoding}
    )
    assert response.status == 200 and (await response.json())["ok"] is True


def requests_by_status(metrics_text: str) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if line.startswith("vlm_server_requests_total{") and 'route="/v1/advise"' in line:
            status = line.split('status="')[1].split('"')[0]
            counts[status] = counts.get(status, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


@pytest.fixture(params=["handler-cancellation", "as-run-server"])
async def slow_server(request, aiohttp_server, server_config):
    """``(host, port, app)`` of a server whose answers take 300 ms.

    ``handler-cancellation``: aiohttp's test server, which cancels the handler of a vanished
    client. ``as-run-server``: an ``AppRunner`` with aiohttp's defaults, as ``run_server`` uses,
    where the handler finishes and its reply goes nowhere.
    """
    app = create_app(server_config(options={"base_ms": 300.0, "per_item_ms": 0.0}))
    if request.param == "handler-cancellation":
        server = await aiohttp_server(app)
        host, port = server.host, server.port
        runner = None
    else:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        host, port = listening.getsockname()
        await web.SockSite(runner, listening).start()
    async with aiohttp.ClientSession() as session:
        while (await session.get(f"http://{host}:{port}/readyz")).status != 200:
            await asyncio.sleep(0.01)
    yield host, port, app
    if runner is not None:
        await runner.cleanup()


async def test_a_client_that_hangs_up_is_logged_once_and_counted_as_499(slow_server, caplog):
    """Over a real socket: gone mid-body, and gone while its (slow) answer is computed."""
    host, port, app = slow_server
    caplog.set_level(logging.DEBUG)
    body = json.dumps(GOOD).encode()
    head = b"POST /v1/advise HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    mid_body = head + b"Content-Length: 500\r\n\r\n" + body[:5]
    whole = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    for request in (mid_body, whole):
        _, writer = await asyncio.open_connection(host, port)
        writer.write(request)
        await writer.drain()
        await asyncio.sleep(0.05)  # the whole one is queued by now
        writer.close()
        await writer.wait_closed()
    registry = app[METRICS_KEY].registry
    for _ in range(200):  # the slow answer is done and its reply dropped
        if registry.get_sample_value("vlm_server_requests_total", {"route": "/v1/advise", "status": "499"}) == 2:
            break
        await asyncio.sleep(0.01)

    async with aiohttp.ClientSession() as session:
        counts = requests_by_status(await (await session.get(f"http://{host}:{port}/metrics")).text())
    assert counts == {"499": 2.0}, counts
    records = [r for r in caplog.records if r.name.startswith(("vlm_server", "aiohttp.server", "aiohttp.web"))]
    assert [r.getMessage() for r in records if r.levelno >= logging.WARNING] == []
    assert all(r.exc_info is None for r in records)
    gone = [r.getMessage() for r in records if "went away" in r.getMessage()]
    assert len(gone) == 2, gone
    assert "before its body was complete" in gone[0]
    assert "while its request was served" in gone[1] or "before its 200 reply" in gone[1]


async def test_image_decoding_is_capped_per_request(aiohttp_client, server_config):
    """Flat PNGs inflate ~1000x: 4 KB of body must not become gigabytes of pixels."""
    config = server_config(
        max_image_side=512, max_decoded_image_bytes=2 * 512 * 512 * 3
    )
    client = await aiohttp_client(create_app(config))
    while (await client.get("/readyz")).status != 200:
        await asyncio.sleep(0.01)
    flat = {"format": "png", "data": png_b64(np.zeros((512, 512, 3), np.uint8))}
    items = [{**GOOD, "id": str(i), "image": flat} for i in range(3)]
    response = await client.post("/v1/advise", json={"items": items})
    assert response.status == 400
    reply = await response.json()
    assert (
        reply["field"] == "items[2].image"
        and "max_decoded_image_bytes" in reply["error"]
    )
    response = await client.post("/v1/advise", json={"items": items[:2]})
    assert response.status == 200


async def test_big_bodies_are_parsed_off_the_event_loop(aiohttp_client, server_config):
    """Decoding 64 flat 1024 px PNGs takes most of a second; the loop must keep ticking."""
    config = server_config(max_image_side=1024, max_items_per_request=64)
    client = await aiohttp_client(create_app(config))
    while (await client.get("/readyz")).status != 200:
        await asyncio.sleep(0.01)
    flat = {"format": "png", "data": png_b64(np.zeros((1024, 1024, 3), np.uint8))}
    body = {"items": [{**GOOD, "id": str(i), "image": flat} for i in range(64)]}
    loop = asyncio.get_running_loop()
    gaps_s: list[float] = []

    async def tick() -> None:
        last_s = loop.time()
        while True:
            await asyncio.sleep(0.005)
            gaps_s.append(loop.time() - last_s)
            last_s = loop.time()

    ticker = asyncio.ensure_future(tick())
    response = await client.post("/v1/advise", json=body)
    ticker.cancel()
    assert response.status == 200
    assert max(gaps_s) < 0.25, f"event loop blocked for {max(gaps_s):.2f} s"
