"""Route handlers: probes, metrics, and the two batched endpoints (parse, queue, wait, reply)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import time
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ValidationError

from vlm_server.batcher import (
    BackendError,
    PredictedLateError,
    QueueFullError,
    RequestTooLargeError,
    ShuttingDownError,
    gather_within,
)
from vlm_server.config import ServerConfig
from vlm_server.content_encoding import HEADER as CONTENT_ENCODING
from vlm_server.content_encoding import ContentEncodingError, decode_body, parse_encoding
from vlm_server.images import DecodeBudget
from vlm_server.keys import CONFIG_KEY, DRAINING_KEY, METRICS_KEY, SERVICES_KEY
from vlm_server.middlewares import ClientDisconnected, RequestError
from vlm_server.schemas import (
    AdviseBatchBody,
    AdviseItemBody,
    ClipBatchBody,
    ClipItemBody,
    error_location,
    error_message,
)
from vlm_server.service import BackendService

logger = logging.getLogger(__name__)

DEADLINE_HEADER = "X-Deadline-Ms"
INLINE_PARSE_BYTES = 8 * 1024  # larger bodies are parsed in a worker thread


async def handle_advise(request: web.Request) -> web.Response:
    return await _serve(request, "advisor", AdviseItemBody, AdviseBatchBody)


async def handle_clip_score(request: web.Request) -> web.Response:
    return await _serve(request, "clip", ClipItemBody, ClipBatchBody)


async def handle_healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def handle_readyz(request: web.Request) -> web.Response:
    services: dict[str, BackendService] = request.app[SERVICES_KEY]
    states = {name: _backend_state(s) for name, s in services.items()}
    status = _readiness(states, request.app[DRAINING_KEY].is_set())
    return web.json_response(
        {"status": status, "backends": states},
        status=200 if status == "ready" else 503,
    )


def _backend_state(service: BackendService) -> str:
    if service.load_error:
        return f"failed: {service.load_error}"
    return "ready" if service.is_ready else "loading"


def _readiness(states: dict[str, str], is_draining: bool) -> str:
    """``draining``, ``failed`` (permanent: a backend could not load), ``loading`` or ``ready``."""
    if is_draining:
        return "draining"
    if any(state.startswith("failed") for state in states.values()):
        return "failed"
    return "ready" if all(state == "ready" for state in states.values()) else "loading"


async def handle_metrics(request: web.Request) -> web.Response:
    for name, service in request.app[SERVICES_KEY].items():
        request.app[METRICS_KEY].queue_depth.labels(name).set(service.batcher.depth)
    body = request.app[METRICS_KEY].render()
    return web.Response(body=body, content_type="text/plain", charset="utf-8")


async def _serve(
    request: web.Request,
    kind: str,
    item_model: type[BaseModel],
    batch_model: type[BaseModel],
) -> web.Response:
    config: ServerConfig = request.app[CONFIG_KEY]
    started_s = time.perf_counter()
    service: BackendService | None = request.app[SERVICES_KEY].get(kind)
    if service is None:
        raise RequestError(404, f"this server has no {kind} backend")
    if request.app[DRAINING_KEY].is_set():
        raise RequestError(503, "server is shutting down", headers={"Retry-After": "1"})
    if service.load_error:
        # a failed load is permanent: no Retry-After
        raise RequestError(503, f"{kind} backend failed to load (see /readyz)")
    if not service.is_ready:
        raise RequestError(503, f"{kind} backend still loading", headers={"Retry-After": "1"})
    deadline_s = _deadline_s(request, config)

    raw = await _read_body(request, config)
    context = {
        "max_side": config.max_image_side,
        "image_hw": service.image_hw,
        "history_frames": service.history_frames,
        "budget": DecodeBudget(config.max_decoded_image_bytes),
    }
    parse = functools.partial(_parse_items, raw, config, item_model, batch_model, context)
    # A flat 1024 px PNG of ~4 KB inflates to 3 MB in ~10 ms: bodies that can hold more than
    # one or two are parsed off the loop (probes and other clients are served meanwhile);
    # small ones skip the thread hop.
    is_batch, items = parse() if len(raw) <= INLINE_PARSE_BYTES else await asyncio.to_thread(parse)

    remaining_s = deadline_s - (time.perf_counter() - started_s)
    try:
        futures = service.batcher.submit(items, deadline_s=remaining_s)
    except PredictedLateError as exc:
        service.metrics.errors.labels(kind, "predicted_late").inc(len(items))
        raise _busy_error(503, exc) from None
    except QueueFullError as exc:
        service.metrics.errors.labels(kind, "queue_full").inc(len(items))
        raise _busy_error(429, exc) from None
    except RequestTooLargeError as exc:
        raise RequestError(413, str(exc), field="items") from None
    except ShuttingDownError as exc:
        raise RequestError(503, str(exc), headers={"Retry-After": "1"}) from None

    try:
        outcomes = await gather_within(futures, remaining_s)
    except TimeoutError:
        # Counted, logged at debug only: under load its client has usually given up already,
        # and an error line per late request buries the log (admission keeps these rare).
        service.metrics.errors.labels(kind, "deadline").inc(len(items))
        logger.debug("%s: deadline of %.0f ms passed in the queue (%d items)", kind, deadline_s * 1000, len(items))
        raise RequestError(504, f"deadline of {deadline_s * 1000:.0f} ms exceeded") from None

    replies = []
    for item, outcome in zip(items, outcomes):
        reply: dict[str, Any] = {"id": item.id}
        if isinstance(outcome, BackendError | ShuttingDownError):
            reply.update(ok=False, error=str(outcome))
        elif isinstance(outcome, BaseException):
            logger.error("unexpected batch outcome %r", outcome)
            reply.update(ok=False, error="internal server error")
        else:
            reply.update(service.result_json(outcome.result))
            reply["timing_ms"] = {
                "queue": round(outcome.queue_s * 1000.0, 3),
                "model": round(outcome.model_s * 1000.0, 3),
                "batch_size": outcome.batch_size,
            }
        replies.append(reply)
    service.metrics.items.labels(kind).inc(len(items))
    return web.json_response({"items": replies} if is_batch else replies[0])


def _busy_error(status: int, exc: QueueFullError) -> RequestError:
    """A 429/503 that tells the client when to come back.

    ``Retry-After`` holds whole seconds (at least 1, as HTTP requires); the body's
    ``retry_after_ms`` holds the precise wait, which the project's client prefers.
    """
    return RequestError(
        status,
        str(exc),
        headers={"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))},
        retry_after_ms=round(exc.retry_after_s * 1000),
    )


def _deadline_s(request: web.Request, config: ServerConfig) -> float:
    """Server deadline, shortened by a client's ``X-Deadline-Ms`` header."""
    deadline_ms = config.request_timeout_ms
    header = request.headers.get(DEADLINE_HEADER)
    if header is not None:
        try:
            client_ms = float(header)
        except ValueError:
            raise RequestError(
                400,
                f"{DEADLINE_HEADER} must be a number, got {header[:32]!r}",
                field=DEADLINE_HEADER,
            ) from None
        if not (math.isfinite(client_ms) and client_ms > 0):
            raise RequestError(
                400,
                f"{DEADLINE_HEADER} must be a positive number, got {header[:32]!r}",
                field=DEADLINE_HEADER,
            )
        deadline_ms = min(deadline_ms, client_ms)
    return deadline_ms / 1000.0


async def _read_body(request: web.Request, config: ServerConfig) -> bytes:
    """The decoded body of a JSON request, within the size and time limits.

    The app reads bodies raw (``auto_decompress=False``): :mod:`vlm_server.content_encoding`
    decodes them and names the encoding when it cannot.
    """
    if request.content_type != "application/json":
        raise RequestError(
            415,
            f"content type must be application/json, got {request.content_type!r}",
            field="Content-Type",
        )
    try:
        coding = parse_encoding(request.headers.get(CONTENT_ENCODING))
    except ContentEncodingError as exc:
        raise RequestError(exc.status, str(exc), field=CONTENT_ENCODING) from None
    if request.content_length is not None and request.content_length > config.max_body_bytes:
        raise RequestError(
            413,
            f"body of {request.content_length} bytes exceeds the limit of {config.max_body_bytes}",
            field="body",
        )
    try:
        raw = await asyncio.wait_for(request.read(), timeout=config.body_read_timeout_ms / 1000.0)
    except asyncio.TimeoutError:  # not yet the builtin on Python 3.10
        raise RequestError(408, "request body not received in time", field="body") from None
    except ConnectionResetError:  # aiohttp's "Connection lost" when the client hangs up mid-body
        raise ClientDisconnected("before its body was complete") from None
    except web.HTTPRequestEntityTooLarge:
        raise RequestError(
            413,
            f"body exceeds the limit of {config.max_body_bytes} bytes",
            field="body",
        ) from None
    except web.RequestPayloadError as exc:  # broken chunked framing
        detail = getattr(exc.__cause__, "message", None) or str(exc)
        raise RequestError(
            400,
            f"body could not be read: {detail}",
            field="body",
            close_connection=True,
        ) from None
    try:
        if coding == "identity":
            return raw
        # inflating megabytes takes milliseconds: off the loop, like parsing (see _serve)
        return await asyncio.to_thread(decode_body, raw, coding, config.max_body_bytes)
    except ContentEncodingError as exc:
        raise RequestError(exc.status, str(exc), field=CONTENT_ENCODING) from None


def _parse_items(
    raw: bytes,
    config: ServerConfig,
    item_model: type[BaseModel],
    batch_model: type[BaseModel],
    context: dict[str, Any],
) -> tuple[bool, list[Any]]:
    """``(is_batch, backend items)`` from a raw body; blocking (runs in a worker thread)."""
    body = _loads(raw)
    is_batch = isinstance(body, dict) and "items" in body
    if is_batch and isinstance(body["items"], list) and len(body["items"]) > config.max_items_per_request:
        raise RequestError(
            413,
            f"{len(body['items'])} items, at most {config.max_items_per_request} per request",
            field="items",
        )
    try:
        parsed = (batch_model if is_batch else item_model).model_validate(body, context=context)
    except ValidationError as exc:
        raise _validation_error(exc) from None
    bodies = parsed.items if is_batch else [parsed]
    _check_unique_ids(bodies)
    return is_batch, [b.to_item() for b in bodies]


def _loads(raw: bytes) -> Any:
    if not raw.strip():
        raise RequestError(400, "body is empty: expected a JSON object", field="body")
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, f"body is not valid JSON: {exc}", field="body") from None
    except RecursionError:
        raise RequestError(400, "body is not valid JSON: nested too deeply", field="body") from None


def _check_unique_ids(bodies: list[Any]) -> None:
    """Replies are matched by id, so one id twice in a batch is ambiguous."""
    first_index: dict[str, int] = {}
    for index, body in enumerate(bodies):
        if body.id in first_index:
            raise RequestError(
                400,
                f"id {body.id!r} repeats items[{first_index[body.id]}].id; ids must be unique in a batch",
                field=f"items[{index}].id",
            )
        first_index[body.id] = index


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _validation_error(exc: ValidationError) -> RequestError:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    field = error_location(first["loc"])
    error = RequestError(400, f"{field}: {error_message(first)}", field=field)
    error.details = [{"field": error_location(e["loc"]), "message": error_message(e)} for e in errors[:20]]
    return error
