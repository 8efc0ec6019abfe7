"""Typed keys of the objects shared on the advisor ``web.Application`` (no singletons)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from vlm_server.config import ServerConfig
from vlm_server.metrics import ServerMetrics

CONFIG_KEY = web.AppKey("config", ServerConfig)
METRICS_KEY = web.AppKey("metrics", ServerMetrics)
SERVICES_KEY = web.AppKey("services", dict)  # "advisor" / "clip" -> BackendService
DRAINING_KEY = web.AppKey("draining", asyncio.Event)
