"""Prometheus metrics of one server instance, in its own registry (no global state)."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

LATENCY_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class ServerMetrics:
    """Requests, errors, queue depth, batch sizes, queue-wait, model and end-to-end latency."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "vlm_server_requests",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.items = Counter(
            "vlm_server_items",
            "items answered by backend",
            ["backend"],
            registry=self.registry,
        )
        self.errors = Counter(
            "vlm_server_errors",
            "errors by backend and kind",
            ["backend", "kind"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "vlm_server_queue_depth",
            "queued items",
            ["backend"],
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "vlm_server_batch_size",
            "items per model call",
            ["backend"],
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.queue_wait_seconds = Histogram(
            "vlm_server_queue_wait_seconds",
            "time from enqueue to batch start",
            ["backend"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.model_seconds = Histogram(
            "vlm_server_model_seconds",
            "time per model call",
            ["backend"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "vlm_server_request_seconds",
            "end-to-end handler latency",
            ["route"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )

    def observe_batch(
        self, backend: str, size: int, model_s: float, failed: bool
    ) -> None:
        self.batch_size.labels(backend).observe(size)
        self.model_seconds.labels(backend).observe(model_s)
        if failed:
            self.errors.labels(backend, "backend").inc(size)

    def render(self) -> bytes:
        """Prometheus text exposition format."""
        return generate_latest(self.registry)
