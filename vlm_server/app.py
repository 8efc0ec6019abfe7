"""The aiohttp application factory: routes, middlewares and backend lifetimes.

``create_app(config)`` builds the same app for tests (``aiohttp_client``) and production
(``run_server``). Shared objects live on the app under typed ``web.AppKey``s (``keys.py``);
each backend's start-up and drain are paired in one cleanup context.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from vlm_server.backends.base import load_backend
from vlm_server.config import BatchingConfig, ServerConfig
from vlm_server.handlers import (
    handle_advise,
    handle_clip_score,
    handle_healthz,
    handle_metrics,
    handle_readyz,
)
from vlm_server.keys import CONFIG_KEY, DRAINING_KEY, METRICS_KEY, SERVICES_KEY
from vlm_server.metrics import ServerMetrics
from vlm_server.middlewares import auth_middleware, error_middleware, query_middleware
from vlm_server.service import BackendService

__all__ = [
    "CONFIG_KEY",
    "DRAINING_KEY",
    "METRICS_KEY",
    "SERVICES_KEY",
    "create_app",
    "run_server",
]


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
        middlewares=[error_middleware, auth_middleware, query_middleware],
        # bodies arrive raw; handlers decode them (vlm_server/content_encoding.py says why)
        handler_args={"auto_decompress": False},
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


def run_server(config: ServerConfig) -> None:
    """Serve until SIGINT/SIGTERM, then drain in-flight requests for ``shutdown_timeout_s``."""
    web.run_app(
        create_app(config),
        host=config.host,
        port=config.port,
        shutdown_timeout=config.shutdown_timeout_s,
        access_log=None,
        # a client that hangs up cancels its handler, which drops its queued items: no model
        # time is spent on answers nobody reads (the error middleware counts it as 499)
        handler_cancellation=True,
    )
