"""Compiled kernels of the per-step hot path (BEV boxes, hazards, infractions, route tracking).

Every kernel is compiled by numba for one explicit signature when its module is imported, so
no env step ever pays a compile: the first import on a machine compiles them all (a few
seconds, once) and writes numba's on-disk cache; later imports load that cache (milliseconds).
numba caches next to the source when that folder is writable and in the user's cache folder
(``~/.cache/numba``, or ``NUMBA_CACHE_DIR``) otherwise, so a read-only install works too; where
neither is writable the kernels are compiled at every import, silently.

Callers hand kernels exactly the declared types (C-contiguous float64 arrays, Python floats
and ints); anything else is a ``TypeError`` from numba, never a silent recompile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numba

F = TypeVar("F", bound=Callable)


def kernel(signature: str) -> Callable[[F], F]:
    """Compile the decorated function now, for ``signature`` only, with numba's disk cache."""

    def compile_(function: F) -> F:
        try:
            return numba.njit(signature, cache=True, nogil=True)(function)
        except RuntimeError:  # numba found no writable cache folder: compile without one
            return numba.njit(signature, nogil=True)(function)

    return compile_


def helper(function: F) -> F:
    """A function the kernels call (compiled into each caller, for the caller's types; as the
    kernels compile at import, it must be defined above them)."""
    return numba.njit(inline="always")(function)
