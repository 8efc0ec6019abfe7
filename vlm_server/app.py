"""The aiohttp application factory: routes, middlewares and backend lifetimes.

``create_app(config)`` builds the same app for tests (``aiohttp_client``) and production
(``run_server``). Shared objects live on the app under typed ``web.AppKey``s; each backend's
start-up and drain are paired in one cleanup context.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ValidationError

from vlm_server.backends.base import load_backend
from vlm_server.batcher import BackendError, QueueFullError, ShuttingDownError
from vlm_server.config import BatchingConfig, ServerConfig
from vlm_server.metrics import ServerMetrics
from vlm_server.schemas import (
    AdviseBatchBody,
    AdviseItemBody,
    ClipBatchBody,
    ClipItemBody,
    error_location,
)
from vlm_server.service import BackendService

logger = logging.getLogger(__name__)

CONFIG_KEY = web.AppKey("config", ServerConfig)
METRICS_KEY = web.AppKey("metrics", ServerMetrics)
SERVICES_KEY = web.AppKey("services", dict)
DRAINING_KEY = web.AppKey("draining", asyncio.Event)

DEADLINE_HEADER = "X-Deadline-Ms"
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RequestError(Exception):
    """A client mistake or an overload condition, answered as JSON with ``status``."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        headers: dict | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.headers = headers or {}
        self.extra = extra
        self.details: list[dict[str, str]] = []


def create_app(
    config: ServerConfig,
    *,
    advisor_backend: Any | None = None,
    clip_backend: Any | None = None,
) -> web.Application:
    """Build the advisor server. Backend instances passed here override ``config``'s specs."""
    if advisor_backend is None and config.advisor is not None:
        advisor_backend = load_backend(config.advisor.spec, config.advisor.options)
    if clip_backend is None and config.clip is not None:
        clip_backend = load_backend(config.clip.spec, config.clip.options)
    if advisor_backend is None and clip_backend is None:
        raise ValueError("configure at least one backend: advisor and/or clip")

    app = web.Application(
        client_max_size=config.max_body_bytes,
        middlewares=[error_middleware, auth_middleware],
    )
    metrics = ServerMetrics()
    app[CONFIG_KEY] = config
    app[METRICS_KEY] = metrics
    app[DRAINING_KEY] = asyncio.Event()
    services: dict[str, BackendService] = {}
    if advisor_backend is not None:
        batching = config.advisor.batching if config.advisor else BatchingConfig()
        services["advisor"] = BackendService(
            "advisor", advisor_backend, batching, metrics
        )
    if clip_backend is not None:
        batching = config.clip.batching if config.clip else BatchingConfig()
        services["clip"] = BackendService("clip", clip_backend, batching, metrics)
    app[SERVICES_KEY] = services

    app.cleanup_ctx.append(_backends_ctx)
    app.on_shutdown.append(_mark_draining)
    app.router.add_post("/v1/advise", handle_advise)
    app.router.add_post("/v1/clip/score", handle_clip_score)
    app.router.add_get("/healthz", handle_healthz)
    app.router.add_get("/readyz", handle_readyz)
    app.router.add_get("/metrics", handle_metrics)
    return app


async def _backends_ctx(app: web.Application) -> AsyncIterator[None]:
    services: dict[str, BackendService] = app[SERVICES_KEY]
    for service in services.values():
        await service.start()
    yield
    # aiohttp has already waited for in-flight handlers; this drains anything still queued.
    for service in services.values():
        await service.stop(app[CONFIG_KEY].shutdown_timeout_s)


async def _mark_draining(app: web.Application) -> None:
    app[DRAINING_KEY].set()


# ---------------------------------------------------------------- middlewares


@web.middleware
async def error_middleware(
    request: web.Request, handler: Handler
) -> web.StreamResponse:
    """Map every outcome to a JSON response, count it, and never leak a traceback."""
    started_s = time.perf_counter()
    metrics = request.app[METRICS_KEY]
    route = (
        request.match_info.route.resource.canonical
        if request.match_info.route.resource
        else "unmatched"
    )
    try:
        response = await handler(request)
    except RequestError as exc:
        body: dict[str, Any] = {"error": str(exc)}
        if exc.field is not None:
            body["field"] = exc.field
        if exc.details:
            body["details"] = exc.details
        body.update(exc.extra)
        response = web.json_response(body, status=exc.status, headers=exc.headers)
    except web.HTTPException as exc:
        response = web.json_response(
            {"error": exc.reason}, status=exc.status, headers=_safe_headers(exc)
        )
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("unhandled error on %s %s", request.method, request.path)
        response = web.json_response({"error": "internal server error"}, status=500)
    metrics.requests.labels(route, str(response.status)).inc()
    metrics.request_seconds.labels(route).observe(time.perf_counter() - started_s)
    return response


def _safe_headers(exc: web.HTTPException) -> dict[str, str]:
    return {
        key: value
        for key, value in exc.headers.items()
        if key.lower() in ("allow", "retry-after")
    }


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Require ``Authorization: Bearer <token>`` when a token is configured (probes exempt)."""
    token = request.app[CONFIG_KEY].token
    if token is not None and request.path not in OPEN_PATHS:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), token.encode()
        ):
            raise RequestError(
                401,
                "missing or wrong bearer token",
                headers={"WWW-Authenticate": "Bearer"},
            )
    return await handler(request)


# ---------------------------------------------------------------- handlers


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
            f"failed to load: {service.load_error}"
            if service.load_error
            else "still loading"
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
    gathered = asyncio.gather(*futures, return_exceptions=True)
    try:
        outcomes = await asyncio.wait_for(gathered, timeout=max(remaining_s, 0.0))
    except TimeoutError:
        service.metrics.errors.labels(kind, "deadline").inc(len(items))
        raise RequestError(
            504, f"deadline of {deadline_s * 1000:.0f} ms exceeded"
        ) from None
    except asyncio.CancelledError:
        for future in futures:
            future.cancel()
        raise

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
    except TimeoutError:
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


def run_server(config: ServerConfig) -> None:
    """Serve until SIGINT/SIGTERM, then drain in-flight requests for ``shutdown_timeout_s``."""
    web.run_app(
        create_app(config),
        host=config.host,
        port=config.port,
        shutdown_timeout=config.shutdown_timeout_s,
        access_log=None,
    )
