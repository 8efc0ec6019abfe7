"""One backend behind the server: loading, its model thread, its dynamic batcher, result checks."""

from __future__ import annotations

import asyncio
import logging
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from vlm_server.backends.base import AdviseResult, ClipResult, is_async_method
from vlm_server.batcher import DynamicBatcher
from vlm_server.config import BatchingConfig
from vlm_server.errors import UsageError
from vlm_server.metrics import ServerMetrics

logger = logging.getLogger(__name__)

ServiceKind = Literal["advisor", "clip"]
BATCH_METHOD: dict[str, str] = {"advisor": "advise_batch", "clip": "score_batch"}


class BackendService:
    """Owns a backend instance; model calls run in a dedicated thread pool, never on the loop."""

    def __init__(
        self,
        kind: ServiceKind,
        backend: Any,
        batching: BatchingConfig,
        metrics: ServerMetrics,
    ) -> None:
        method = BATCH_METHOD[kind]
        if not callable(getattr(backend, method, None)):
            raise UsageError(
                f"{kind} backend {type(backend).__name__} has no {method}(items) method"
            )
        self.kind = kind
        self.backend = backend
        self.metrics = metrics
        self.is_ready = False
        self.load_error: str | None = None
        self._method_name = method
        self._executor = ThreadPoolExecutor(
            max_workers=batching.max_concurrent_batches,
            thread_name_prefix=f"vlm-{kind}",
        )
        self.batcher: DynamicBatcher = DynamicBatcher(
            kind, self._run_batch, batching, metrics
        )
        self._load_task: asyncio.Task | None = None

    @property
    def image_hw(self) -> tuple[int, int] | None:
        """Image size the backend requires, or None for any size."""
        hw = getattr(self.backend, "image_hw", None)
        return None if hw is None else (int(hw[0]), int(hw[1]))

    @property
    def history_frames(self) -> int | None:
        """Past frames a CLIP item must send (``history``), or None when the backend does not say."""
        frames = getattr(self.backend, "history_frames", None)
        return None if frames is None else int(frames)

    async def start(self) -> None:
        """Start the batcher and begin loading the model in the background (``/readyz`` waits)."""
        self.batcher.start()
        self._load_task = asyncio.get_running_loop().create_task(self._load())

    async def wait_ready(self) -> None:
        if self._load_task is not None:
            await asyncio.shield(self._load_task)

    async def stop(self, drain_timeout_s: float) -> None:
        """Drain queued and running batches, then release the backend and the model thread."""
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
            await asyncio.gather(self._load_task, return_exceptions=True)
        await self.batcher.close(drain_timeout_s)
        close = getattr(self.backend, "close", None)
        try:
            if is_async_method(self.backend, "close"):
                await close()
            elif callable(close):
                await asyncio.get_running_loop().run_in_executor(self._executor, close)
        except Exception:
            logger.exception("closing %s backend failed", self.kind)
        self._executor.shutdown(
            wait=False, cancel_futures=True
        )  # drained: nothing left to wait for

    async def _load(self) -> None:
        load = getattr(self.backend, "load", None)
        try:
            if is_async_method(self.backend, "load"):
                await load()
            elif callable(load):
                await asyncio.get_running_loop().run_in_executor(self._executor, load)
            self.is_ready = True
            logger.info("%s backend %s ready", self.kind, type(self.backend).__name__)
        except Exception as exc:
            self.load_error = f"{type(exc).__name__}: {exc}"
            logger.exception("loading %s backend failed", self.kind)

    async def _run_batch(self, items: list[Any]) -> list[Any]:
        method = getattr(self.backend, self._method_name)
        if is_async_method(self.backend, self._method_name):
            results = await method(items)
        else:
            results = await asyncio.get_running_loop().run_in_executor(
                self._executor, method, items
            )
        return list(results)

    def result_json(self, result: Any) -> dict[str, Any]:
        """JSON fields of one backend result; malformed results become per-item errors."""
        if isinstance(result, AdviseResult) and self.kind == "advisor":
            if result.error is not None or result.action is None:
                self.metrics.errors.labels(self.kind, "item").inc()
                return {
                    "ok": False,
                    "error": result.error or "no action",
                    "text": result.text,
                }
            acc, steer = (float(v) for v in result.action)
            if not (math.isfinite(acc) and math.isfinite(steer)):
                self.metrics.errors.labels(self.kind, "item").inc()
                return {
                    "ok": False,
                    "error": "backend returned a non-finite action",
                    "text": result.text,
                }
            action = [min(1.0, max(-1.0, acc)), min(1.0, max(-1.0, steer))]
            return {"ok": True, "action": action, "text": result.text}
        if isinstance(result, ClipResult) and self.kind == "clip":
            if (
                result.error is not None
                or result.bonus is None
                or not math.isfinite(result.bonus)
            ):
                self.metrics.errors.labels(self.kind, "item").inc()
                return {"ok": False, "error": result.error or "no bonus"}
            return {
                "ok": True,
                "bonus": float(result.bonus),
                "margin": result.margin,
                "stats": result.stats,
            }
        self.metrics.errors.labels(self.kind, "item").inc()
        return {"ok": False, "error": f"backend returned {type(result).__name__}"}
