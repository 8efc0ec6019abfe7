"""Route handlers: probes, metrics, and the two batched endpoints (parse, queue, wait, reply)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ValidationError

from vlm_server.batcher import (
    BackendError,
    QueueFullError,
    ShuttingDownError,
    gather_within,
)
from vlm_server.config import ServerConfig
from vlm_server.keys import CONFIG_KEY, DRAINING_KEY, METRICS_KEY, SERVICES_KEY
from vlm_server.middlewares import RequestError
from vlm_server.schemas import (
    AdviseBatchBody,
    AdviseItemBody,
    ClipBatchBody,
    ClipItemBody,
    error_location,
)
from vlm_server.service import BackendService

logger = logging.getLogger(__name__)

DEADLINE_HEADER = "X-Deadline-Ms"


async def handle_advise(request: web.Request) -> web.Response:
    return await _serve(request, "advisor", AdviseItemBody, AdviseBatchBody)


async def handle_clip_score(request: web.Request) -> web.Response:
    return await _serve(request, "clip", ClipItemBody, ClipBatchBody)


async def handle_healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def handle_readyz(request: web.Request) -> web.Response:
    services: dict[str, BackendService] = request.app[SERVICES_KEY]
    states = {
        name: "ready"
        if s.is_ready
        else (f"failed: {s.load_error}" if s.load_error else "loading")
        for name, s in services.items()
    }
    is_ready = (
        all(s.is_ready for s in services.values())
        and not request.app[DRAINING_KEY].is_set()
    )
    status = (
        "ready"
        if is_ready
        else ("draining" if request.app[DRAINING_KEY].is_set() else "not ready")
    )
    return web.json_response(
        {"status": status, "backends": states}, status=200 if is_ready else 503
    )


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
    if not service.is_ready:
        reason = (
            "failed to load (see /readyz)" if service.load_error else "still loading"
        )
        raise RequestError(
            503, f"{kind} backend {reason}", headers={"Retry-After": "1"}
        )
    deadline_s = _deadline_s(request, config)

    body = await _read_json(request, config)
    is_batch = isinstance(body, dict) and "items" in body
    context = {"max_side": config.max_image_side, "image_hw": service.image_hw}
    if (
        is_batch
        and isinstance(body["items"], list)
        and len(body["items"]) > config.max_items_per_request
    ):
        raise RequestError(
            413,
            f"{len(body['items'])} items, at most {config.max_items_per_request} per request",
            field="items",
        )
    try:
        parsed = (batch_model if is_batch else item_model).model_validate(
            body, context=context
        )
    except ValidationError as exc:
        raise _validation_error(exc) from None
    bodies = parsed.items if is_batch else [parsed]
    items = [b.to_item() for b in bodies]

    try:
        futures = service.batcher.submit(items)
    except QueueFullError as exc:
        service.metrics.errors.labels(kind, "queue_full").inc(len(items))
        retry_after_s = max(1, math.ceil(exc.retry_after_s))
        raise RequestError(
            429,
            str(exc),
            headers={"Retry-After": str(retry_after_s)},
            retry_after_ms=round(exc.retry_after_s * 1000),
        ) from None
    except ShuttingDownError as exc:
        raise RequestError(503, str(exc), headers={"Retry-After": "1"}) from None

    remaining_s = deadline_s - (time.perf_counter() - started_s)
    try:
        outcomes = await gather_within(futures, remaining_s)
    except TimeoutError:
        service.metrics.errors.labels(kind, "deadline").inc(len(items))
        raise RequestError(
            504, f"deadline of {deadline_s * 1000:.0f} ms exceeded"
        ) from None

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


def _deadline_s(request: web.Request, config: ServerConfig) -> float:
    """Server deadline, shortened by a client's ``X-Deadline-Ms`` header."""
    deadline_ms = config.request_timeout_ms
    header = request.headers.get(DEADLINE_HEADER)
    if header is not None:
        try:
            client_ms = float(header)
        except ValueError:
            raise RequestError(
                400, f"{DEADLINE_HEADER} must be a number, got {header[:32]!r}"
            ) from None
        if not (math.isfinite(client_ms) and client_ms > 0):
            raise RequestError(
                400, f"{DEADLINE_HEADER} must be a positive number, got {header[:32]!r}"
            )
        deadline_ms = min(deadline_ms, client_ms)
    return deadline_ms / 1000.0


async def _read_json(request: web.Request, config: ServerConfig) -> Any:
    if request.content_type != "application/json":
        raise RequestError(
            415, f"content type must be application/json, got {request.content_type!r}"
        )
    if (
        request.content_length is not None
        and request.content_length > config.max_body_bytes
    ):
        raise RequestError(
            413,
            f"body of {request.content_length} bytes exceeds the limit of {config.max_body_bytes}",
        )
    try:
        raw = await asyncio.wait_for(
            request.read(), timeout=config.body_read_timeout_ms / 1000.0
        )
    except asyncio.TimeoutError:  # not yet the builtin on Python 3.10
        raise RequestError(408, "request body not received in time") from None
    except web.HTTPRequestEntityTooLarge:
        raise RequestError(
            413, f"body exceeds the limit of {config.max_body_bytes} bytes"
        ) from None
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(
            400, f"body is not valid JSON: {exc}", field="body"
        ) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _validation_error(exc: ValidationError) -> RequestError:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    field = error_location(first["loc"])
    error = RequestError(400, f"{field}: {first['msg']}", field=field)
    error.details = [
        {"field": error_location(e["loc"]), "message": e["msg"]} for e in errors[:20]
    ]
    return error
