"""Cross-cutting request handling: JSON errors without tracebacks, metrics, bearer-token auth."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from vlm_server.keys import CONFIG_KEY, METRICS_KEY

logger = logging.getLogger(__name__)

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
