"""Clients of the advisor server: async, non-blocking (for env workers) and blocking.

* ``AsyncAdvisorClient``: pooled HTTP, deadlines, retries with jittered back-off on 429/503
  and connection errors, round-robin over replicas, in-flight tracking.
* ``BackgroundClient``: ``submit(id, payload)`` returns at once; ``poll()`` later returns the
  finished ``(id, reply)`` pairs. It runs its own event loop in a daemon thread and packs
  everything submitted since the last send into one list request.
* ``BlockingAdvisorClient`` / ``advise(...)``: one answer per call, with a bounded wait and a
  clear ``AdvisorUnavailable`` error when no replica answers (``found-rl eval``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import threading
import time
from collections import deque
from collections.abc import Coroutine, Sequence
from typing import Any, Literal

import aiohttp
import numpy as np

from vlm_server.images import ImageFormat, encode_image

Kind = Literal["advise", "clip"]
PATHS: dict[str, str] = {"advise": "/v1/advise", "clip": "/v1/clip/score"}
RETRY_STATUSES = frozenset({429, 503})
TOKEN_ENV = "VLM_SERVER_TOKEN"


class AdvisorError(RuntimeError):
    """The server refused or failed a request (the message says why)."""


class AdvisorUnavailable(AdvisorError):
    """No replica answered before the deadline (down, unreachable, or overloaded)."""


def advise_payload(
    image: np.ndarray | None,
    command: int,
    speed_mps: float,
    state: dict[str, Any] | None = None,
    image_format: ImageFormat = "raw",
) -> dict[str, Any]:
    """Wire form of an ``/v1/advise`` item, without its id."""
    payload: dict[str, Any] = {"command": int(command), "speed_mps": float(speed_mps)}
    if image is not None:
        payload["image"] = encode_image(image, image_format)
    if state is not None:
        payload["state"] = state
    return payload


def clip_payload(
    image: np.ndarray,
    command: int,
    speed_mps: float,
    action: Sequence[float],
    image_format: ImageFormat = "raw",
    history: Sequence[np.ndarray] | None = None,
) -> dict[str, Any]:
    """Wire form of a ``/v1/clip/score`` item (executed ``action = (acc, steer)``), without its id.

    ``history``: past RGB BEVs, oldest first, for a model whose image input stacks them.
    """
    payload = {
        "image": encode_image(image, image_format),
        "command": int(command),
        "speed_mps": float(speed_mps),
        "action": [float(action[0]), float(action[1])],
    }
    if history is not None:
        payload["history"] = [encode_image(frame, image_format) for frame in history]
    return payload


class AsyncAdvisorClient:
    """Async HTTP client over one or more server replicas (use in ``async with``)."""

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        token: str | None = None,
        timeout_s: float = 10.0,
        max_retries: int = 8,
        backoff_s: float = 0.02,
        max_backoff_s: float = 1.0,
        max_in_flight: int = 64,
        seed: int | None = None,
    ) -> None:
        self.urls = [urls] if isinstance(urls, str) else list(urls)
        if not self.urls:
            raise ValueError("urls: give at least one server URL")
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"urls: {url!r} must start with http:// or https://")
        if timeout_s <= 0 or max_retries < 0 or max_in_flight < 1:
            raise ValueError(
                "timeout_s must be > 0, max_retries >= 0, max_in_flight >= 1"
            )
        self.token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self.retries = 0
        self._replicas = itertools.cycle(self.urls)
        self._rng = random.Random(seed)
        self._session: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None

    async def __aenter__(self) -> AsyncAdvisorClient:
        self._ensure_session()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def advise(
        self, items: list[dict[str, Any]], timeout_s: float | None = None
    ) -> list[dict[str, Any]]:
        """Replies (``{"id", "ok", "action", ...}``) for ``/v1/advise`` items with ids, in order."""
        return (await self.request("advise", {"items": items}, timeout_s))["items"]

    async def clip_score(
        self, items: list[dict[str, Any]], timeout_s: float | None = None
    ) -> list[dict[str, Any]]:
        """Replies (``{"id", "ok", "bonus", "margin", "stats"}``) for ``/v1/clip/score`` items."""
        return (await self.request("clip", {"items": items}, timeout_s))["items"]

    async def request(
        self, kind: Kind, body: dict[str, Any], timeout_s: float | None = None
    ) -> dict[str, Any]:
        """POST ``body`` with retries until the deadline; raises ``AdvisorError``/``AdvisorUnavailable``."""
        session, slots = self._ensure_session()
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        last_problem = "no attempt made"
        async with slots:
            self.in_flight += 1
            try:
                for attempt in range(self.max_retries + 1):
                    remaining_s = deadline - time.monotonic()
                    if remaining_s <= 0:
                        break
                    url = next(self._replicas) + PATHS[kind]
                    headers = {"X-Deadline-Ms": f"{remaining_s * 1000:.0f}"}
                    if self.token:
                        headers["Authorization"] = f"Bearer {self.token}"
                    retry_after_s = 0.0
                    try:
                        async with session.post(
                            url,
                            json=body,
                            headers=headers,
                            timeout=aiohttp.ClientTimeout(total=remaining_s),
                        ) as response:
                            if response.status == 200:
                                return await response.json()
                            problem, retry_after_s = await _error_details(response)
                            if response.status not in RETRY_STATUSES:
                                raise AdvisorError(
                                    f"{url} answered {response.status}: {problem}"
                                )
                            last_problem = (
                                f"{url} answered {response.status}: {problem}"
                            )
                    except (
                        aiohttp.ClientConnectionError,
                        asyncio.TimeoutError,
                        OSError,
                    ) as exc:
                        last_problem = f"{url}: {type(exc).__name__} {exc}".strip()
                    self.retries += 1
                    backoff = self.backoff_s * 2**attempt * (0.5 + self._rng.random())
                    wait_s = min(
                        self.max_backoff_s,
                        max(backoff, retry_after_s),
                        deadline - time.monotonic(),
                    )
                    await asyncio.sleep(max(0.0, wait_s))
            finally:
                self.in_flight -= 1
        raise AdvisorUnavailable(
            f"no answer from {', '.join(self.urls)} within {timeout_s or self.timeout_s:.1f} s "
            f"({self.max_retries} retries); last problem: {last_problem}"
        )

    def _ensure_session(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        if self._session is None or self._slots is None:
            connector = aiohttp.TCPConnector(limit=self.max_in_flight)
            self._session = aiohttp.ClientSession(connector=connector)
            self._slots = asyncio.Semaphore(self.max_in_flight)
        return self._session, self._slots


async def _error_details(response: aiohttp.ClientResponse) -> tuple[str, float]:
    """Error message and suggested wait: the body's ``retry_after_ms``, else ``Retry-After``."""
    try:
        body = await response.json()
        message, retry_after_ms = (
            str(body.get("error", ""))[:300],
            body.get("retry_after_ms"),
        )
    except (aiohttp.ContentTypeError, ValueError, AttributeError):
        message, retry_after_ms = (await response.text())[:300], None
    if isinstance(retry_after_ms, (int, float)) and retry_after_ms >= 0:
        return message, float(retry_after_ms) / 1000.0
    try:
        return message, max(0.0, float(response.headers.get("Retry-After", "0")))
    except ValueError:
        return message, 0.0


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name=name, daemon=True
        )
        self._thread.start()

    def run(
        self, coro: Coroutine[Any, Any, Any], timeout_s: float | None = None
    ) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5.0)
        if not self.loop.is_running():
            self.loop.close()


class BackgroundClient:
    """Fire-and-poll client for env workers: never blocks the control loop.

    Replies are the server's per-item dicts; a request that failed as a whole yields
    ``{"id", "ok": False, "error"}`` for each of its items (with ``"unavailable": True`` when no
    replica answered), so every submitted id comes back exactly once.
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        max_items_per_request: int = 64,
        **client_options: Any,
    ) -> None:
        if max_items_per_request < 1:
            raise ValueError(
                f"max_items_per_request must be >= 1, got {max_items_per_request}"
            )
        self._max_items = max_items_per_request
        self._thread = _LoopThread("vlm-client")
        self._client = AsyncAdvisorClient(urls, **client_options)
        self._outbox: dict[str, deque[dict[str, Any]]] = {
            "advise": deque(),
            "clip": deque(),
        }
        self._wakeup = asyncio.Event()
        self._done: deque[tuple[str, dict[str, Any]]] = deque()
        self._arrived = threading.Event()
        self._lock = threading.Lock()
        self._pending = 0
        self._tasks: set[asyncio.Task] = set()
        self._sender = self._thread.run(self._start_sender())

    @property
    def pending(self) -> int:
        """Submitted items whose reply has not been polled yet."""
        return self._pending

    def submit(
        self, item_id: str, payload: dict[str, Any], kind: Kind = "advise"
    ) -> None:
        """Queue one item (``advise_payload``/``clip_payload`` output) under ``item_id``."""
        if kind not in PATHS:
            raise ValueError(f"kind must be 'advise' or 'clip', got {kind!r}")
        item = {**payload, "id": str(item_id)}
        with self._lock:
            self._pending += 1
        self._thread.loop.call_soon_threadsafe(self._enqueue, kind, item)

    def poll(self, wait_s: float = 0.0) -> list[tuple[str, dict[str, Any]]]:
        """All replies that arrived since the last poll, as ``(id, reply)``.

        Args:
            wait_s: when none has arrived, wait up to this long for the first one (0: never
                block, the control loop's default).
        """
        if wait_s > 0 and not self._done:
            self._arrived.clear()
            if not self._done:  # a reply that landed between the two checks is not waited for
                self._arrived.wait(wait_s)
        finished = []
        while self._done:
            finished.append(self._done.popleft())
        with self._lock:
            self._pending -= len(finished)
        return finished

    def close(self) -> None:
        """Cancel outstanding requests and stop the thread."""

        async def shutdown() -> None:
            self._sender.cancel()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(self._sender, *self._tasks, return_exceptions=True)
            await self._client.close()

        if self._thread.loop.is_running():
            self._thread.run(shutdown(), timeout_s=10.0)
        self._thread.stop()

    def __enter__(self) -> BackgroundClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def _start_sender(self) -> asyncio.Task:
        return asyncio.get_running_loop().create_task(self._send_forever())

    def _enqueue(self, kind: str, item: dict[str, Any]) -> None:
        self._outbox[kind].append(item)
        self._wakeup.set()

    async def _send_forever(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            for kind, outbox in self._outbox.items():
                while outbox:
                    chunk = [
                        outbox.popleft()
                        for _ in range(min(self._max_items, len(outbox)))
                    ]
                    task = asyncio.get_running_loop().create_task(
                        self._send(kind, chunk)
                    )
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)

    async def _send(self, kind: Kind, items: list[dict[str, Any]]) -> None:
        try:
            replies = (await self._client.request(kind, {"items": items}))["items"]
        except AdvisorUnavailable as exc:  # flagged, so a caller can tell "down" from "refused"
            replies = [
                {"id": item["id"], "ok": False, "error": str(exc), "unavailable": True} for item in items
            ]
        except AdvisorError as exc:
            replies = [
                {"id": item["id"], "ok": False, "error": str(exc)} for item in items
            ]
        except (
            Exception
        ) as exc:  # keep the one-reply-per-id promise even on client bugs
            replies = [
                {"id": item["id"], "ok": False, "error": f"{type(exc).__name__}: {exc}"}
                for item in items
            ]
        for reply in replies:
            self._done.append((reply["id"], reply))
        self._arrived.set()


class BlockingAdvisorClient:
    """One blocking call per answer, for evaluation scripts."""

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        timeout_s: float = 5.0,
        **client_options: Any,
    ) -> None:
        self.timeout_s = timeout_s
        self._thread = _LoopThread("vlm-blocking-client")
        self._client = AsyncAdvisorClient(urls, timeout_s=timeout_s, **client_options)
        self._ids = itertools.count()

    def advise(
        self,
        image: np.ndarray | None,
        command: int,
        speed_mps: float,
        state: dict[str, Any] | None = None,
    ) -> tuple[float, float]:
        """The advisor's ``(acc, steer)``; raises ``AdvisorUnavailable`` after ``timeout_s``."""
        item = {
            **advise_payload(image, command, speed_mps, state),
            "id": str(next(self._ids)),
        }
        reply = self._thread.run(
            self._client.advise([item]), timeout_s=self.timeout_s + 5.0
        )[0]
        if not reply.get("ok"):
            raise AdvisorError(f"advisor could not answer: {reply.get('error')}")
        acc, steer = reply["action"]
        return float(acc), float(steer)

    def close(self) -> None:
        if self._thread.loop.is_running():
            self._thread.run(self._client.close(), timeout_s=5.0)
        self._thread.stop()

    def __enter__(self) -> BlockingAdvisorClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def advise(
    url: str,
    image: np.ndarray | None,
    command: int,
    speed_mps: float,
    state: dict[str, Any] | None = None,
    *,
    timeout_s: float = 5.0,
    token: str | None = None,
) -> tuple[float, float]:
    """One-shot ``(acc, steer)`` from the server at ``url`` (opens and closes a connection)."""
    with BlockingAdvisorClient(url, timeout_s=timeout_s, token=token) as client:
        return client.advise(image, command, speed_mps, state)
