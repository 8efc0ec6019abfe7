"""The backend plug-in contract: item/result types, protocols and loading by import path.

Writing an advisor plug-in (e.g. ``found_rl.advisors:ExpertAdvisor``)::

    class ExpertAdvisor:
        def __init__(self, **options): ...          # options come from the server config
        def load(self) -> None: ...                 # heavy set-up; runs once in a worker thread
        def advise_batch(self, items: list[AdviseItem]) -> list[AdviseResult]: ...
        def close(self) -> None: ...                # optional

The constructor refuses an option it cannot take by raising ``vlm_server.errors.UsageError``
naming it (the server then exits with that line); any other exception of the constructor is a
bug of the plug-in and keeps its traceback.

``advise_batch`` gets up to ``max_batch_size`` items and must return one result per item, in
order. It runs in the server's single model thread (never on the event loop), so it may block
and needs no locking against itself. A per-item failure is an ``AdviseResult(error=...)``;
an exception fails the whole batch (every item gets an error reply, the server stays up).
A backend whose ``advise_batch``/``load``/``close`` are ``async def`` (e.g. a network
upstream) is awaited on the event loop instead.

CLIP scorers implement the same shape with ``score_batch(items: list[ClipItem]) ->
list[ClipResult]`` and may declare ``image_hw = (H, W)`` so the server rejects other sizes.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from vlm_server.errors import MissingPathError, UsageError

BACKEND_ALIASES: dict[str, str] = {
    "openclip": "vlm_server.backends.clip:OpenClipScorer",
    "hf": "vlm_server.backends.hf_vlm:HuggingFaceAdvisor",
    "openai": "vlm_server.backends.openai_compat:OpenAICompatAdvisor",
    "fixed-cost": "vlm_server.backends.fixed_cost:FixedCostAdvisor",
    "fixed-cost-clip": "vlm_server.backends.fixed_cost:FixedCostScorer",
    "expert": "found_rl.advisors:ExpertAdvisor",
}


@dataclass(frozen=True)
class AdviseItem:
    """One request for an action label.

    Attributes:
        id: caller's id, echoed in the result (e.g. a step id ``"slot:episode:step"``).
        image: ``[H, W, 3]`` uint8 RGB BEV of o_t, or None when the advisor needs none.
        command: RoadOption value (-1, 1..6).
        speed_mps: forward speed at t, m/s.
        state: privileged simulator state for an expert advisor (free-form JSON), or None.
    """

    id: str
    image: np.ndarray | None
    command: int
    speed_mps: float
    state: dict[str, Any] | None = None


@dataclass(frozen=True)
class AdviseResult:
    """An advisor's answer: ``action = (acc, steer)`` in ``[-1, 1]²``, or ``error``.

    ``text`` is the raw model output where there is one (VLM backends).
    """

    action: tuple[float, float] | None
    text: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ClipItem:
    """One CLIP scoring request: image of o_t, command and speed at t, executed action a_t.

    Attributes:
        image: ``[H, W, 3]`` uint8 RGB BEV.
        action: executed ``(acc, steer)``.
        history: past RGB BEVs of the episode, oldest first, for a model that stacks them
            (``vlm_server.clip_inputs.IMAGE_INPUTS``); empty otherwise.
    """

    id: str
    image: np.ndarray
    command: int
    speed_mps: float
    action: tuple[float, float]
    history: tuple[np.ndarray, ...] = ()


@dataclass(frozen=True)
class ClipResult:
    """Bonus ``b`` and raw margin ``m`` with the running statistics used to normalise it."""

    bonus: float | None
    margin: float | None = None
    stats: dict[str, float] = field(default_factory=dict)
    error: str | None = None


@runtime_checkable
class AdvisorBackend(Protocol):
    """An action advisor (VLM, upstream server, or privileged expert plug-in)."""

    def load(self) -> None: ...

    def advise_batch(self, items: list[AdviseItem]) -> list[AdviseResult]: ...


@runtime_checkable
class ClipScorerBackend(Protocol):
    """A CLIP-style scorer of (image, command, speed, executed action)."""

    def load(self) -> None: ...

    def score_batch(self, items: list[ClipItem]) -> list[ClipResult]: ...


def load_backend(spec: str, options: dict[str, Any] | None = None) -> Any:
    """Instantiate ``"module:Class"`` (or an alias from ``BACKEND_ALIASES``) with ``options``.

    Raises:
        UsageError: the spec names no class, the class takes no such option, or its constructor
            refused a value (a :class:`UsageError` of its own, e.g. a missing model file). Any
            other exception of the constructor is a bug and passes with its traceback.
    """
    path = BACKEND_ALIASES.get(spec, spec)
    module_name, sep, class_name = path.partition(":")
    if not sep or not module_name or not class_name:
        raise UsageError(
            f"backend {spec!r}: expected 'module:Class' or one of {sorted(BACKEND_ALIASES)}"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(
            f"backend {spec!r}: cannot import module {module_name!r}: {exc}"
        ) from exc
    cls = getattr(module, class_name, None)
    if cls is None:
        raise UsageError(
            f"backend {spec!r}: module {module_name!r} has no attribute {class_name!r}"
        )
    options = options or {}
    try:  # the options against the signature, so that a TypeError inside the constructor stays a bug
        inspect.signature(cls).bind(**options)
    except TypeError as exc:
        raise UsageError(f"backend {spec!r}: bad options {sorted(options)}: {exc}") from None
    try:
        return cls(**options)
    except UsageError as exc:  # the constructor's own check of a value
        kind = MissingPathError if isinstance(exc, FileNotFoundError) else UsageError
        raise kind(f"backend {spec!r}: bad options {sorted(options)}: {exc}") from exc


def is_async_method(backend: Any, name: str) -> bool:
    """True when ``backend.name`` is a coroutine function (awaited on the event loop)."""
    return inspect.iscoroutinefunction(getattr(backend, name, None))
