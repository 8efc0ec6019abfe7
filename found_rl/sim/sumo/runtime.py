"""The process's one libsumo simulation and which backend currently owns it.

libsumo links SUMO into the Python process, so there is exactly one simulation per process.
Several :class:`~found_rl.sim.sumo.backend.SumoBackend` objects may exist (tests, evaluation
on two maps); the one that calls :func:`acquire` last owns the simulation, and a backend
that lost it must reset before stepping again.
"""

from __future__ import annotations

import contextlib
import io
import weakref
from typing import Any, Protocol


def import_libsumo() -> Any:
    """``libsumo``, imported without the pyarrow version notice it prints on import."""
    with contextlib.redirect_stdout(io.StringIO()):
        import libsumo
    return libsumo


class _Owner(Protocol):
    def _start_simulation(self) -> None: ...


# A weak reference, so an owner that is dropped without close() can still be collected.
_owner: weakref.ref | None = None
_running = False


def _current() -> object | None:
    return _owner() if _owner is not None else None


def acquire(owner: _Owner) -> bool:
    """Make ``owner`` the simulation's owner, (re)starting libsumo for it if needed.

    Returns:
        True if the simulation was (re)started for ``owner`` (its state is fresh).
    """
    global _owner, _running
    if _current() is owner:
        return False
    _close()
    # From here on libsumo may be running, even if the start fails halfway.
    _running = True
    try:
        owner._start_simulation()
    except BaseException:
        _close()
        raise
    _owner = weakref.ref(owner)
    return True


def owns(owner: object) -> bool:
    return _current() is owner


def release(owner: object) -> None:
    """Close the simulation if ``owner`` holds it."""
    if owns(owner):
        _close()


def _close() -> None:
    global _owner, _running
    if _running:
        with contextlib.suppress(Exception):
            import_libsumo().close()
    _owner, _running = None, False
