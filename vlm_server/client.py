"""Clients of the advisor server: async, non-blocking (for env workers) and blocking.

* ``AsyncAdvisorClient``: pooled HTTP, deadlines, round-robin over replicas, and the rule that
  **busy is not dead**. A 429/503 (with a retry hint) or 504 answer proves the server alive: it
  is retried after its ``retry_after_ms``/``Retry-After`` (jittered) until ``busy_timeout_s``
  runs out, then fails with ``AdvisorBusy``. Only silence counts towards ``AdvisorUnavailable``:
  connection refused or reset, or a timeout after which the replica's ``/healthz`` does not
  answer either within ``probe_timeout_s`` (a timeout whose probe answers is a slow server,
  retried more slowly, i.e. busy).
* ``BackgroundClient``: ``submit(id, payload)`` returns at once; ``poll()`` later returns the
  finished ``(id, reply)`` pairs. It runs its own event loop in a daemon thread, keeps unsent
  items in an outbox, and paces itself AIMD-style: at most ``allowed_in_flight`` requests of at
  most ``items_per_request`` items, both halved on busy signals and grown back on successes.
  ``stats()`` says how it is going.
* ``BlockingAdvisorClient`` / ``advise(...)``: one answer per call, with a bounded wait and a
  clear ``AdvisorUnavailable`` error when no replica answers (``found-rl eval``).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import numpy as np

from vlm_server.images import ImageFormat, encode_image

Kind = Literal["advise", "clip"]
PATHS: dict[str, str] = {"advise": "/v1/advise", "clip": "/v1/clip/score"}
BUSY_STATUSES = frozenset({429, 503, 504})
"""Answers of a server that is alive but cannot serve now (a 503 without a retry hint is a
refusal instead: the server's "backend failed to load" is permanent)."""
RETRY_STATUSES = BUSY_STATUSES  # the former name
PROBE_PATH = "/healthz"
DEADLINE_SHARE = 0.9
"""Share of an attempt's timeout sent as its ``X-Deadline-Ms``: the rest is for the answer's trip."""
TOKEN_ENV = "VLM_SERVER_TOKEN"


class AdvisorError(RuntimeError):
    """The server refused or failed a request (the message says why)."""


class AdvisorUnavailable(AdvisorError):
    """No replica answered at all for ``timeout_s``: refused or reset connections, or timeouts
    after which the replica's liveness probe went unanswered too (down or unreachable)."""


class AdvisorBusy(AdvisorError):
    """A replica is alive but could not serve the request within ``busy_timeout_s``.

    It kept answering 429/503/504 (or answered its liveness probe while the request timed out):
    slow, not dead. Callers should slow down, not mark the advisor as down.
    """


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


BusyListener = Callable[[], None]
"""Called on every busy signal of one request (a busy answer, or a timeout of a live server)."""


class AsyncAdvisorClient:
    """Async HTTP client over one or more server replicas (use in ``async with``).

    Args:
        urls: one server URL or several replicas (requests go round-robin).
        token: bearer token (default: ``$VLM_SERVER_TOKEN``).
        timeout_s: how long one attempt may go unanswered, and how long the replicas may stay
            silent (no HTTP answer of any kind) before a request fails as ``AdvisorUnavailable``.
            Sent (90 % of it) as ``X-Deadline-Ms`` so the server never works for a client that
            has left, and answers in time when it cannot serve.
        max_retries: attempts that got no answer (refused, reset, dead timeouts) beyond the
            first, before ``AdvisorUnavailable`` even within ``timeout_s``.
        backoff_s, max_backoff_s: jittered exponential back-off between unanswered attempts,
            and after a busy answer that gave no retry hint.
        max_in_flight: requests at once on this client (the connection pool's size).
        busy_timeout_s: how long a request may keep being told "busy" (429/503/504, or
            timeouts of a replica that answers its liveness probe) before ``AdvisorBusy``.
        probe_timeout_s: how long the liveness probe (``GET /healthz``) after a timeout waits.
        seed: seeds the jitter (tests).
    """

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
        busy_timeout_s: float = 120.0,
        probe_timeout_s: float = 1.0,
        seed: int | None = None,
    ) -> None:
        self.urls = [urls] if isinstance(urls, str) else list(urls)
        if not self.urls:
            raise ValueError("urls: give at least one server URL")
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"urls: {url!r} must start with http:// or https://")
        _check_positive(timeout_s=timeout_s, busy_timeout_s=busy_timeout_s, probe_timeout_s=probe_timeout_s)
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_in_flight = max_in_flight
        self.busy_timeout_s = busy_timeout_s
        self.probe_timeout_s = probe_timeout_s
        self.in_flight = 0
        self.retries = 0
        self.busy_answers = 0
        """429/503/504 answers (each one retried after the server's hint)."""
        self.timeouts = 0
        """attempts that got no HTTP answer within their timeout (live or dead replica)."""
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
        self,
        kind: Kind,
        body: dict[str, Any],
        timeout_s: float | None = None,
        *,
        busy_timeout_s: float | None = None,
        on_busy: BusyListener | None = None,
    ) -> dict[str, Any]:
        """POST ``body``, retrying busy answers and unanswered attempts; the 200 answer's JSON.

        Args:
            kind: ``"advise"`` or ``"clip"``.
            body: the JSON body (``{"items": [...]}``).
            timeout_s: overrides ``self.timeout_s`` for this request.
            busy_timeout_s: overrides ``self.busy_timeout_s`` (e.g. what is left of an item's
                budget after it waited in an outbox).
            on_busy: called on every busy signal, so a caller can slow down at once.

        Raises:
            AdvisorUnavailable: no replica answered anything for ``timeout_s``, or more than
                ``max_retries`` attempts went unanswered.
            AdvisorBusy: replicas were alive but busy until ``busy_timeout_s`` ran out.
            AdvisorError: a replica refused the request (4xx, 5xx other than busy).
        """
        session, slots = self._ensure_session()
        attempt = _Attempts(
            self,
            timeout_s or self.timeout_s,
            self.busy_timeout_s if busy_timeout_s is None else busy_timeout_s,
        )
        async with slots:
            self.in_flight += 1
            try:
                while True:
                    attempt.check_budgets()
                    base_url = next(self._replicas)
                    answer = await self._post(session, base_url, kind, body, attempt.time_left_s())
                    if isinstance(answer, dict):
                        return answer
                    self.retries += 1
                    wait_s = await self._judge(session, base_url, answer, attempt, on_busy)
                    await asyncio.sleep(wait_s)
            finally:
                self.in_flight -= 1

    async def _post(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        kind: Kind,
        body: dict[str, Any],
        timeout_s: float,
    ) -> dict[str, Any] | _Busy | _Silent:
        """One attempt: the 200 answer's JSON, or what went wrong (refusals raise)."""
        url = base_url + PATHS[kind]
        # a little short of our own timeout, so that the server's 504 (or its admission 503)
        # reaches us before we stop listening: an answer is cheaper than a timeout and a probe
        headers = {"X-Deadline-Ms": f"{max(1.0, timeout_s * 1000 * DEADLINE_SHARE):.0f}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            async with session.post(
                url, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                if response.status == 200:
                    return await _json_answer(response, url)
                problem, retry_after_s = await _error_details(response)
                message = f"{url} answered {response.status}: {problem}"
                is_hinted = retry_after_s is not None
                if response.status in BUSY_STATUSES and (is_hinted or response.status != 503):
                    return _Busy(message, retry_after_s)
                raise AdvisorError(message)
        except asyncio.TimeoutError:  # before the connection errors: some timeouts are both
            self.timeouts += 1
            return _Silent(f"{url}: no answer within {timeout_s:.1f} s", timed_out=True)
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as exc:
            return _Silent(f"{url}: {type(exc).__name__} {exc}".strip(), timed_out=False)

    async def _judge(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        answer: _Busy | _Silent,
        attempt: _Attempts,
        on_busy: BusyListener | None,
    ) -> float:
        """Book a failed attempt as busy or silent; the wait before the next one.

        A timeout is only silence when the replica's liveness probe goes unanswered too:
        a server that answers ``/healthz`` but not the request is slow, i.e. busy.
        """
        if isinstance(answer, _Silent) and answer.timed_out and await self._is_alive(session, base_url):
            answer = _Busy(f"{answer.problem}, though {base_url}{PROBE_PATH} answers: slow", None)
            wait_s = attempt.timeout_s * (0.5 + self._rng.random())  # slower than a hinted retry
        elif isinstance(answer, _Busy):
            self.busy_answers += 1
            wait_s = self._busy_wait_s(answer.retry_after_s, attempt.busy_signals)
        else:
            attempt.on_silence(answer.problem)
            return self._backoff_s(attempt.silent_attempts, attempt.silence_left_s())
        if on_busy is not None:
            on_busy()  # before the budget check below, which may give up
        attempt.on_busy(answer.problem, wait_s)
        return wait_s

    def _busy_wait_s(self, retry_after_s: float | None, busy_signals: int) -> float:
        """The server's hint stretched by up to 50 % (never earlier, so clients spread out),
        else exponential back-off."""
        if retry_after_s is None:
            return self._backoff_s(busy_signals, math.inf)
        return max(retry_after_s, self.backoff_s) * (1.0 + 0.5 * self._rng.random())

    def _backoff_s(self, attempt: int, limit_s: float) -> float:
        backoff_s = self.backoff_s * 2 ** min(attempt, 30) * (0.5 + self._rng.random())
        return max(0.0, min(self.max_backoff_s, backoff_s, limit_s))

    async def _is_alive(self, session: aiohttp.ClientSession, base_url: str) -> bool:
        """Whether the replica answers its liveness probe at all (any HTTP status is life)."""
        try:
            async with session.get(
                base_url + PROBE_PATH, timeout=aiohttp.ClientTimeout(total=self.probe_timeout_s)
            ):
                return True
        except (asyncio.TimeoutError, aiohttp.ClientError, OSError):
            return False

    def _ensure_session(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        if self._session is None or self._slots is None:
            # room for a liveness probe per request beside the requests themselves
            connector = aiohttp.TCPConnector(limit=2 * self.max_in_flight)
            self._session = aiohttp.ClientSession(connector=connector)
            self._slots = asyncio.Semaphore(self.max_in_flight)
        return self._session, self._slots


@dataclass(frozen=True)
class _Busy:
    """An attempt the server answered with "busy" (or timed out while the server was alive)."""

    problem: str
    retry_after_s: float | None


@dataclass(frozen=True)
class _Silent:
    """An attempt nobody answered: refused, reset, or timed out."""

    problem: str
    timed_out: bool


class _Attempts:
    """The two budgets of one request: silence (``timeout_s`` since the last sign of life, and
    ``max_retries``) and busyness (``busy_timeout_s`` since the start)."""

    def __init__(self, client: AsyncAdvisorClient, timeout_s: float, busy_timeout_s: float) -> None:
        now = time.monotonic()
        self.client = client
        self.timeout_s = timeout_s
        self.busy_timeout_s = busy_timeout_s
        self.silent_since = now
        self.give_up_busy_at = now + busy_timeout_s
        self.silent_attempts = 0
        self.busy_signals = 0
        self.last_problem = "no attempt made"

    def silence_left_s(self) -> float:
        return self.silent_since + self.timeout_s - time.monotonic()

    def time_left_s(self) -> float:
        """The next attempt's timeout: within both budgets."""
        return max(0.001, min(self.silence_left_s(), self.give_up_busy_at - time.monotonic()))

    def on_silence(self, problem: str) -> None:
        self.silent_attempts += 1
        self.last_problem = problem

    def on_busy(self, problem: str, wait_s: float) -> None:
        """A sign of life: the silence budget starts again; the busy one does not."""
        self.busy_signals += 1
        self.silent_since = time.monotonic() + wait_s
        self.last_problem = problem
        if time.monotonic() + wait_s >= self.give_up_busy_at:
            raise self._busy()

    def check_budgets(self) -> None:
        """Raise when a budget is spent: silence means dead, busyness busy.

        A busy budget spent without a single sign of life (a short one: what was left of an
        item's after the outbox) is silence too: nothing proved the server alive.
        """
        is_busy_spent = time.monotonic() >= self.give_up_busy_at
        is_silence_spent = self.silence_left_s() <= 0 or self.silent_attempts > self.client.max_retries
        if is_silence_spent or (is_busy_spent and self.busy_signals == 0):
            raise AdvisorUnavailable(
                f"no answer from {', '.join(self.client.urls)} within timeout_s={self.timeout_s:.1f} s "
                f"({self.silent_attempts} attempts unanswered); last problem: {self.last_problem}"
            )
        if is_busy_spent:
            raise self._busy()

    def _busy(self) -> AdvisorBusy:
        return AdvisorBusy(
            f"{', '.join(self.client.urls)} stayed busy for busy_timeout_s={self.busy_timeout_s:.1f} s "
            f"({self.busy_signals} busy signals); last: {self.last_problem}"
        )


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")


async def _json_answer(response: aiohttp.ClientResponse, url: str) -> dict[str, Any]:
    """A 200 answer's JSON object; anything else is the server's mistake, named."""
    try:
        answer = await response.json()
    except (aiohttp.ContentTypeError, ValueError) as exc:
        raise AdvisorError(f"{url} answered 200 with a body that is not JSON: {exc}") from None
    if not isinstance(answer, dict):
        raise AdvisorError(f"{url} answered 200 with JSON {type(answer).__name__}, expected an object")
    return answer


async def _error_details(response: aiohttp.ClientResponse) -> tuple[str, float | None]:
    """Error message and suggested wait: the body's ``retry_after_ms``, else ``Retry-After``.

    The wait is None when the server gave no hint.
    """
    try:
        body = await response.json()
        message, retry_after_ms = (
            str(body.get("error", ""))[:300],
            body.get("retry_after_ms"),
        )
    except (aiohttp.ContentTypeError, ValueError, AttributeError):
        message, retry_after_ms = (await response.text())[:300], None
    if isinstance(retry_after_ms, (int, float)) and math.isfinite(retry_after_ms) and retry_after_ms >= 0:
        return message, float(retry_after_ms) / 1000.0
    header = response.headers.get("Retry-After")
    try:
        seconds = float(header) if header is not None else math.nan
    except ValueError:
        seconds = math.nan  # an HTTP date, or garbage: no usable hint
    return message, seconds if math.isfinite(seconds) and seconds >= 0 else None


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


@dataclass(frozen=True)
class ClientStats:
    """A snapshot of a ``BackgroundClient``'s counters (since it started) and pace (now)."""

    busy_answers: int
    """429/503/504 answers: the server is alive but asked to come back later."""
    timeouts: int
    """attempts that got no HTTP answer in time (a live server's, then busy, or a dead one's)."""
    unavailable_items: int
    """items answered ``unavailable``: no replica answered at all."""
    busy_items: int
    """items answered ``busy``: given up after ``busy_timeout_s`` of a live but busy server."""
    in_flight_requests: int
    """requests sent and not yet finished."""
    queued_items: int
    """submitted items waiting in the outbox to be sent."""
    allowed_in_flight: int
    """requests the pace allows at once now (1 .. ``max_in_flight_requests``)."""
    items_per_request: int
    """items the pace puts in one request now (1 .. ``max_items_per_request``)."""


class _Pace:
    """AIMD pacing (TCP's congestion control, in requests and items instead of bytes).

    A busy signal halves the requests allowed in flight, and once that is down to one, the items
    per request; successes win them back additively (items first, then about one request per
    round trip). Signals from requests sent before the last cut do not cut again: a burst of
    busy answers to requests that were all sent at the old pace is one congestion event.
    """

    def __init__(self, max_requests: int, max_items: int) -> None:
        self.max_requests = max_requests
        self.max_items = max_items
        self._requests = float(max_requests)
        self.items = max_items
        self.cuts = 0

    @property
    def allowed_requests(self) -> int:
        return max(1, int(self._requests))

    def on_busy(self, cuts_when_sent: int) -> None:
        if cuts_when_sent < self.cuts:
            return
        self.cuts += 1
        if self.allowed_requests > 1:
            self._requests = float(max(1, self.allowed_requests // 2))
        else:
            self.items = max(1, self.items // 2)

    def on_success(self) -> None:
        if self.items < self.max_items:
            self.items = min(self.max_items, self.items + max(1, self.max_items // 8))
        elif self._requests < self.max_requests:
            self._requests = min(float(self.max_requests), self._requests + 1.0 / self.allowed_requests)


@dataclass
class _Queued:
    item: dict[str, Any]
    submitted_s: float


class BackgroundClient:
    """Fire-and-poll client for env workers: never blocks the control loop.

    ``submit`` only queues the item in an outbox; the client's thread sends the outbox in
    requests of up to ``items_per_request`` items, at most ``allowed_in_flight`` requests at
    once (AIMD pace, see ``stats()``). Replies are the server's per-item dicts; an item that
    failed as a whole yields ``{"id", "ok": False, "error"}`` plus ``"unavailable": True``
    (no replica answered at all: dead) or ``"busy": True`` (a replica was alive but could not
    serve it within ``busy_timeout_s`` of its submission), or neither (the server refused it).
    Every submitted id comes back exactly once from ``poll``.

    When the server is slower than the submissions, the outbox grows (``stats().queued_items``);
    its items are answered ``busy`` once they are ``busy_timeout_s`` old, so nothing waits for
    ever, but a caller that cares should submit less.

    Args:
        urls: server URL(s).
        timeout_s, max_retries: of each request (see ``AsyncAdvisorClient``).
        max_in_flight_requests: cap on requests in flight (default: 2 per replica).
        busy_timeout_s: how long an item may wait, from its submission, on a server that is
            alive but busy, before it is answered ``busy``.
        max_items_per_request: cap on items packed into one request.
        **client_options: further ``AsyncAdvisorClient`` options (token, backoff, ...).
    """

    SWEEP_S = 1.0  # how often the outbox is checked for items past busy_timeout_s

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        timeout_s: float = 10.0,
        max_retries: int = 8,
        max_in_flight_requests: int | None = None,
        busy_timeout_s: float = 120.0,
        max_items_per_request: int = 64,
        **client_options: Any,
    ) -> None:
        if max_items_per_request < 1:
            raise ValueError(f"max_items_per_request must be >= 1, got {max_items_per_request}")
        replicas = 1 if isinstance(urls, str) else len(urls)
        max_requests = 2 * max(1, replicas) if max_in_flight_requests is None else max_in_flight_requests
        if max_requests < 1:
            raise ValueError(f"max_in_flight_requests must be >= 1, got {max_in_flight_requests}")
        self._client = AsyncAdvisorClient(
            urls,
            timeout_s=timeout_s,
            max_retries=max_retries,
            busy_timeout_s=busy_timeout_s,
            max_in_flight=max_requests,
            **client_options,
        )
        self.busy_timeout_s = busy_timeout_s
        self._pace = _Pace(max_requests, max_items_per_request)
        self._thread = _LoopThread("vlm-client")
        self._outbox: dict[str, deque[_Queued]] = {"advise": deque(), "clip": deque()}
        self._wakeup = asyncio.Event()
        self._done: deque[tuple[str, dict[str, Any]]] = deque()
        self._arrived = threading.Event()
        self._lock = threading.Lock()
        self._pending = 0
        self._queued = 0
        self._failed = {"unavailable": 0, "busy": 0}
        self._in_flight = 0  # requests sent whose replies are not published yet
        self._tasks: set[asyncio.Task] = set()
        self._sender = self._thread.run(self._start_sender())

    @property
    def pending(self) -> int:
        """Submitted items whose reply has not been polled yet."""
        return self._pending

    def stats(self) -> ClientStats:
        """Counters and the current pace; cheap and thread-safe (read by the control loop)."""
        return ClientStats(
            busy_answers=self._client.busy_answers,
            timeouts=self._client.timeouts,
            unavailable_items=self._failed["unavailable"],
            busy_items=self._failed["busy"],
            in_flight_requests=self._in_flight,
            queued_items=self._queued,
            allowed_in_flight=self._pace.allowed_requests,
            items_per_request=self._pace.items,
        )

    def submit(
        self, item_id: str, payload: dict[str, Any], kind: Kind = "advise"
    ) -> None:
        """Queue one item (``advise_payload``/``clip_payload`` output) under ``item_id``; never blocks."""
        self.submit_many([(item_id, payload, kind)])

    def submit_many(self, items: Sequence[tuple[str, dict[str, Any], Kind]]) -> None:
        """Queue ``(item_id, payload, kind)`` items at once; never blocks.

        One hand-over to the client's thread for all of them: a caller that gathers its items
        first (a training loop's lock-steps) wakes that thread, and takes Python's lock from
        its own work, once per batch instead of once per item.
        """
        now = time.monotonic()
        queued = []
        for item_id, payload, kind in items:
            if kind not in PATHS:
                raise ValueError(f"kind must be 'advise' or 'clip', got {kind!r}")
            queued.append((kind, _Queued({**payload, "id": str(item_id)}, now)))
        if not queued:
            return
        with self._lock:
            self._pending += len(queued)
            self._queued += len(queued)
        self._thread.loop.call_soon_threadsafe(self._enqueue_many, queued)

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
        """Cancel outstanding requests and stop the thread (unanswered items are dropped)."""

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

    def _enqueue_many(self, queued: list[tuple[str, _Queued]]) -> None:
        for kind, item in queued:
            self._outbox[kind].append(item)
        self._wakeup.set()

    async def _send_forever(self) -> None:
        # A timer, not asyncio.wait_for: on Python 3.11 wait_for can swallow the cancellation
        # that close() sends when the event is set at the same moment, and close() would hang.
        loop = asyncio.get_running_loop()
        while True:
            sweep = loop.call_later(self.SWEEP_S, self._wakeup.set)
            try:
                await self._wakeup.wait()
            finally:
                sweep.cancel()
            self._wakeup.clear()
            self._expire_old_items()
            self._dispatch()

    def _dispatch(self) -> None:
        """Start requests while the pace allows and the outbox holds items."""
        while self._in_flight < self._pace.allowed_requests:
            taken = self._take_chunk()
            if taken is None:
                return
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._send(*taken))
            self._tasks.add(task)
            task.add_done_callback(self._on_request_done)

    def _on_request_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)

    def _take_chunk(self) -> tuple[Kind, list[_Queued]] | None:
        """The next request's items: from the kind whose oldest item waited longest."""
        heads = [(outbox[0].submitted_s, kind) for kind, outbox in self._outbox.items() if outbox]
        if not heads:
            return None
        kind = min(heads)[1]
        outbox = self._outbox[kind]
        chunk = [outbox.popleft() for _ in range(min(self._pace.items, len(outbox)))]
        with self._lock:
            self._queued -= len(chunk)
        return kind, chunk  # type: ignore[return-value]

    def _expire_old_items(self) -> None:
        """Answer ``busy`` the outbox items that waited ``busy_timeout_s`` without being sent."""
        limit_s = time.monotonic() - self.busy_timeout_s
        for outbox in self._outbox.values():
            expired = []
            while outbox and outbox[0].submitted_s <= limit_s:
                expired.append(outbox.popleft())
            if expired:
                with self._lock:
                    self._queued -= len(expired)
                message = f"not sent within busy_timeout_s={self.busy_timeout_s:.1f} s: the server is busy"
                self._finish(_failed_replies(expired, message, "busy"))

    async def _send(self, kind: Kind, chunk: list[_Queued]) -> None:
        """Send one request and turn its outcome into one reply per item."""
        cuts_when_sent = self._pace.cuts

        def on_busy() -> None:
            nonlocal cuts_when_sent
            self._pace.on_busy(cuts_when_sent)
            cuts_when_sent = self._pace.cuts  # the retry goes out at the new pace

        items = [queued.item for queued in chunk]
        busy_left_s = min(q.submitted_s for q in chunk) + self.busy_timeout_s - time.monotonic()
        try:
            if busy_left_s <= 0:
                raise AdvisorBusy(f"not sent within busy_timeout_s={self.busy_timeout_s:.1f} s: the server is busy")
            answer = await self._client.request(
                kind, {"items": items}, busy_timeout_s=busy_left_s, on_busy=on_busy
            )
            replies = _replies_for(items, answer)
            self._pace.on_success()
        except AdvisorUnavailable as exc:
            # dead for this request means dead for everything queued behind it too
            replies = _failed_replies(chunk + self._take_all(), str(exc), "unavailable")
        except AdvisorBusy as exc:
            replies = _failed_replies(chunk, str(exc), "busy")
        except AdvisorError as exc:
            replies = _failed_replies(chunk, str(exc), None)
        except Exception as exc:  # keep the one-reply-per-id promise even on client bugs
            replies = _failed_replies(chunk, f"{type(exc).__name__}: {exc}", None)
        self._in_flight -= 1  # before the replies show: stats never count a finished request
        self._wakeup.set()  # a slot is free
        self._finish(replies)

    def _take_all(self) -> list[_Queued]:
        taken = [queued for outbox in self._outbox.values() for queued in outbox]
        for outbox in self._outbox.values():
            outbox.clear()
        with self._lock:
            self._queued -= len(taken)
        return taken

    def _finish(self, replies: list[dict[str, Any]]) -> None:
        for reply in replies:
            for flag in ("unavailable", "busy"):
                if reply.get(flag):
                    self._failed[flag] += 1
            self._done.append((reply["id"], reply))
        self._arrived.set()


def _failed_replies(
    chunk: list[_Queued], error: str, flag: Literal["unavailable", "busy"] | None
) -> list[dict[str, Any]]:
    """One failure reply per item; ``flag`` tells dead (``unavailable``) from alive (``busy``)."""
    extra = {flag: True} if flag is not None else {}
    return [{"id": queued.item["id"], "ok": False, "error": error, **extra} for queued in chunk]


def _replies_for(items: list[dict[str, Any]], answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The server's per-item replies, one per sent id: a missing or unknown one is an error."""
    by_id = {}
    for reply in answer.get("items", []) if isinstance(answer.get("items"), list) else []:
        if isinstance(reply, dict) and "id" in reply:
            by_id[str(reply["id"])] = reply
    return [
        by_id.get(item["id"], {"id": item["id"], "ok": False, "error": "the server's answer left this item out"})
        for item in items
    ]


class BlockingAdvisorClient:
    """One blocking call per answer, for evaluation scripts.

    Same busy/dead rule as ``AsyncAdvisorClient``: a busy server is waited for (up to
    ``busy_timeout_s``, then ``AdvisorBusy``), a silent one fails after ``timeout_s``
    (``AdvisorUnavailable``).
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        timeout_s: float = 5.0,
        busy_timeout_s: float = 120.0,
        **client_options: Any,
    ) -> None:
        self._client = AsyncAdvisorClient(
            urls, timeout_s=timeout_s, busy_timeout_s=busy_timeout_s, **client_options
        )
        self.timeout_s = timeout_s
        # the async client bounds every call; this is only a guard against a wedged loop
        self._call_limit_s = busy_timeout_s + timeout_s + self._client.probe_timeout_s + 5.0
        self._thread = _LoopThread("vlm-blocking-client")
        self._ids = itertools.count()

    def advise(
        self,
        image: np.ndarray | None,
        command: int,
        speed_mps: float,
        state: dict[str, Any] | None = None,
    ) -> tuple[float, float]:
        """The advisor's ``(acc, steer)``.

        Raises:
            AdvisorUnavailable: no replica answered anything for ``timeout_s``.
            AdvisorBusy: the server stayed busy for ``busy_timeout_s``.
            AdvisorError: the server refused the request or could not answer this item.
        """
        item = {
            **advise_payload(image, command, speed_mps, state),
            "id": str(next(self._ids)),
        }
        reply = self._thread.run(
            self._client.advise([item]), timeout_s=self._call_limit_s
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
