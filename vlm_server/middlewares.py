"""Cross-cutting request handling: JSON errors without tracebacks, metrics, auth, query checks."""

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
        close_connection: bool = False,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.headers = headers or {}
        # the body could not be read to its end: the connection cannot carry another request
        self.close_connection = close_connection
        self.extra = extra
        self.details: list[dict[str, str]] = []


class ClientDisconnected(Exception):
    """The client closed its connection before the server could answer: its fault, not ours."""


CLIENT_CLOSED_STATUS = 499
"""Metrics label for a request whose client went away (nginx's convention); never sent."""


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
        if exc.close_connection:
            response.force_close()  # says "Connection: close" so clients open a new one
    except web.HTTPException as exc:
        response = web.json_response(
            _http_error_body(request, exc),
            status=exc.status,
            headers=_safe_headers(exc),
        )
    except ClientDisconnected as exc:
        _log_client_gone(request, str(exc))
        response = web.Response(status=CLIENT_CLOSED_STATUS)  # counted below; the write goes nowhere
    except asyncio.CancelledError:
        # aiohttp cancels the handler of a vanished client when run with handler_cancellation
        if _client_is_gone(request):
            _log_client_gone(request, "while its request was served")
            metrics.requests.labels(route, str(CLIENT_CLOSED_STATUS)).inc()
        raise
    except Exception:
        logger.exception("unhandled error on %s %s", request.method, request.path)
        response = web.json_response({"error": "internal server error"}, status=500)
    status = response.status
    if status != CLIENT_CLOSED_STATUS and _client_is_gone(request):
        _log_client_gone(request, f"before its {status} reply")
        status = CLIENT_CLOSED_STATUS
    metrics.requests.labels(route, str(status)).inc()
    metrics.request_seconds.labels(route).observe(time.perf_counter() - started_s)
    return response


def _client_is_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _log_client_gone(request: web.Request, when: str) -> None:
    """One DEBUG line per vanished client (counted as 499 in the metrics).

    Routine for a busy server and no fault of ours: clients that time out leave by the dozen,
    and a line per client at a visible level would bury the log.
    """
    logger.debug("client %s went away %s: %s %s", request.remote, when, request.method, request.path)


def _http_error_body(request: web.Request, exc: web.HTTPException) -> dict[str, Any]:
    """Routing errors name what was wrong (path or method) and what would have worked."""
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(m for m in exc.allowed_methods if m != "HEAD"))
        return {
            "error": f"method {request.method} is not allowed on {request.path}; use {allowed}",
            "field": "method",
        }
    if isinstance(exc, web.HTTPNotFound):
        return {
            "error": f"no endpoint at {request.path!r}; endpoints: {', '.join(_endpoints(request.app))}",
            "field": "path",
        }
    return {"error": exc.reason}


def _endpoints(app: web.Application) -> list[str]:
    return sorted(
        f"{route.method} {route.resource.canonical}"
        for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    )


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
                field="Authorization",
                headers={"WWW-Authenticate": "Bearer"},
            )
    return await handler(request)


@web.middleware
async def query_middleware(
    request: web.Request, handler: Handler
) -> web.StreamResponse:
    """No endpoint takes query parameters, so one given is a caller's mistake, not ignored."""
    if request.query:
        name = next(iter(request.query))
        raise RequestError(
            400,
            f"unknown query parameter {name!r}: {request.method} {request.path} takes no query parameters",
            field=name,
        )
    return await handler(request)
