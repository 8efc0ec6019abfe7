"""Ctrl-C and SIGTERM as a request to stop where nothing is half done.

A signal raised as an exception wherever the trainer happens to be could land between taking
a lock-step's due answers off the label queue and attaching them, or between storing a
transition and counting it, and the final checkpoint would then save a state no uninterrupted
run ever had. So the first signal only records the request; the loop ends at its next safe
point (:meth:`StopRequests.check`), and so do long waits (the label path's wait for a late
advisor, an evaluation) that are safe points themselves. A second signal stops at once, for a
user who does not want to wait.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Interrupted(Exception):
    """SIGINT or SIGTERM reached the trainer (exit code 130 after the final checkpoint)."""


class StopRequests:
    """The trainer's SIGINT/SIGTERM handler; install with :meth:`installed`."""

    def __init__(self) -> None:
        self.requested: str | None = None
        """the name of the signal that asked to stop, if any"""
        self._raised = False
        self._at_once = 0

    def check(self) -> None:
        """Raise :class:`Interrupted` once a stop was requested (only the first time)."""
        if self.requested is not None and not self._raised:
            self._raised = True
            raise Interrupted(self.requested)

    @contextmanager
    def at_once(self) -> Iterator[None]:
        """Inside this block a signal raises at once: the whole block is a safe point."""
        self.check()
        self._at_once += 1
        try:
            yield
        finally:
            self._at_once -= 1

    @contextmanager
    def installed(self) -> Iterator[StopRequests]:
        def handler(signum: int, frame: Any) -> None:
            name = signal.Signals(signum).name
            first = self.requested is None
            self.requested = self.requested or name
            if self._at_once or not first:
                self._raised = True
                raise Interrupted(name)

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
