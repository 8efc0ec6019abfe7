"""Where an env step's time goes: timers wrapped around each stage of ``DrivingEnv.step``.

``found-rl bench sim`` wraps the backend, the renderer, the hazard queries, the infraction
monitor and the route tracker of a live env (and SUMO's own step and snapshot read inside the
backend), then splits each step's wall-clock and CPU time into :data:`STAGES`.
"""

from __future__ import annotations

import contextlib
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

STAGES = ("sumo_step", "snapshot_read", "backend_other", "render", "hazards", "infractions", "route_tracking", "rest")
"""Where an env step's time goes (``rest``: state vector, reward, info and the env's own code)."""


@dataclass
class Timer:
    """Wall-clock and thread CPU seconds, and calls, accumulated around one callable while
    ``enabled`` (CPU time leaves out waiting for a core on a busy machine)."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0
    calls: int = 0
    enabled: bool = True


def timed(function: Callable, timer: Timer) -> Callable:
    """``function``, adding its wall and CPU time to ``timer`` while the timer is enabled."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if not timer.enabled:
            return function(*args, **kwargs)
        cpu_start = time.thread_time()
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            timer.seconds += time.perf_counter() - start
            timer.cpu_seconds += time.thread_time() - cpu_start
            timer.calls += 1

    return call


class _Timed:
    """Wraps an object so calls of one method are timed (the rest passes through)."""

    def __init__(self, inner: Any, method: str, timer: Timer) -> None:
        self._inner, self._method, self._timer = inner, method, timer

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        return timed(value, self._timer) if name == self._method else value


@contextlib.contextmanager
def stage_timers(env: Any) -> Iterator[dict[str, Timer]]:
    """Time each stage of ``env``'s steps (see :data:`STAGES`) while the context is open.

    The backend, renderer and monitor are wrapped on the env; SUMO's step and snapshot read
    on the backend instance (a backend without them reports 0); the hazard queries and the
    route tracker where the env looks them up. Everything is restored on exit.
    """
    import found_rl.env as env_module
    from found_rl.routes.progress import RouteTracker

    timers = {name: Timer(enabled=False) for name in ("backend", *STAGES)}
    inner = env.unwrapped
    backend, renderer, monitor = inner.backend, inner.renderer, inner.monitor
    hazards_module, tracker_update = env_module.hazards, RouteTracker.update
    simulation = getattr(getattr(backend, "_libsumo", None), "simulation", None)
    sumo_step = getattr(simulation, "step", None)
    reader = getattr(backend, "_reader", None)  # the SUMO backend's SnapshotReader
    has_snapshot = callable(getattr(reader, "read", None))
    hazard_names = ("affecting_light", "affecting_stop_sign", "leading_vehicle", "walkers_in_path")
    inner.backend = _Timed(backend, "step", timers["backend"])
    inner.renderer = _Timed(renderer, "render", timers["render"])
    inner.monitor = _Timed(monitor, "step", timers["infractions"])
    env_module.hazards = types.SimpleNamespace(
        **{name: timed(getattr(hazards_module, name), timers["hazards"]) for name in hazard_names}
    )
    RouteTracker.update = timed(tracker_update, timers["route_tracking"])
    if sumo_step is not None:
        simulation.step = timed(sumo_step, timers["sumo_step"])
    if has_snapshot:
        reader.read = timed(reader.read, timers["snapshot_read"])
    try:
        yield timers
    finally:
        inner.backend, inner.renderer, inner.monitor = backend, renderer, monitor
        env_module.hazards, RouteTracker.update = hazards_module, tracker_update
        if sumo_step is not None:
            simulation.step = sumo_step
        if has_snapshot:
            del reader.read


def stage_breakdown_ms(timers: dict[str, Timer], step_s: float, steps: int, cpu: bool = False) -> dict[str, float]:
    """Milliseconds per env step of each of :data:`STAGES`, wall-clock or thread CPU time
    (``cpu``); they add up to ``step_s`` (the steps' total of the same clock)."""
    ms = {name: 1000.0 * (timer.cpu_seconds if cpu else timer.seconds) / steps for name, timer in timers.items()}
    ms["backend_other"] = ms["backend"] - ms["sumo_step"] - ms["snapshot_read"]
    named = ("backend", "render", "hazards", "infractions", "route_tracking")
    ms["rest"] = 1000.0 * step_s / steps - sum(ms[name] for name in named)
    return {name: ms[name] for name in STAGES}
