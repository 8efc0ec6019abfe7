"""Who gets the CPU during training: the learner's core is the learner's.

The update is the loop's critical path (with the overlapped loop the workers step while it
runs), so everything beside it runs at a lower priority with few threads of its own: the clip
workers, a spawned advisor server (:func:`server_threads` threads) and the evaluation workers,
each with its :class:`Placement`: a nice value and, when ``resources.learner_cpus`` pins the
learner, the CPUs left to the others. A setting the machine cannot honour warns once, names the
setting and falls back.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def usable_cores() -> int:
    """The cores this process may run on (its affinity), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def lower_priority(increment: int, setting: str) -> None:
    """Raise this process's nice value by ``increment`` (warns, naming ``setting``, if refused)."""
    if increment <= 0:
        return
    try:
        os.nice(increment)
    except OSError as exc:
        log.warning("%s: cannot lower this process's priority by %d (%s); it keeps its priority",
                    setting, increment, exc)


@dataclass(frozen=True)
class Placement:
    """Where a process beside the learner runs: a nice increment and, when the learner is
    pinned, the CPUs left to the others. Plain data, so it travels to spawned children.

    Attributes:
        setting: the run-config key of the nice value, named in warnings.
        nice: how much lower than the trainer's its priority is.
        cpus: the CPUs it may use (``None``: any).
    """

    setting: str
    nice: int = 0
    cpus: tuple[int, ...] | None = None

    def apply(self, *, own_session: bool = False) -> None:
        """Take this placement in the calling process (a child, before its work starts).

        ``own_session``: the process leads a session of its own (a spawned server), and Linux's
        autogroup scheduling weighs sessions against each other before nice values: its
        session's group is lowered too, or the nice value would only rank it within itself.
        """
        lower_priority(self.nice, self.setting)
        if own_session and self.nice > 0:
            with contextlib.suppress(OSError):  # no autogroups here: the nice value already counts
                Path("/proc/self/autogroup").write_text(str(self.nice))
        if self.cpus:
            try:
                os.sched_setaffinity(0, self.cpus)
            except (AttributeError, OSError) as exc:
                log.warning("resources.learner_cpus: cannot keep this process off the learner's CPUs (%s)", exc)


def _run_placed(placement: Placement, factory: Callable[[], Any]) -> Any:
    placement.apply()
    return factory()


def placed(factory: Callable[[], Any], placement: Placement) -> Callable[[], Any]:
    """An env factory that first takes ``placement`` in the worker process it runs in."""
    return functools.partial(_run_placed, placement, factory)


def split_cpus(learner_cpus: Sequence[int] | None) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """``(the learner's CPUs, everyone else's)`` for ``resources.learner_cpus``.

    ``None`` for a side that is not restricted. CPUs this process may not use warn once (the
    setting named) and nothing is pinned; pinning the learner to every usable CPU leaves the
    others unrestricted.
    """
    if not learner_cpus:
        return None, None
    try:
        allowed = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        log.warning("resources.learner_cpus: this platform cannot pin a process; not pinned")
        return None, None
    unknown = sorted(set(learner_cpus) - allowed)
    if unknown:
        log.warning("resources.learner_cpus: CPUs %s are not usable here (usable: %s); not pinned",
                    unknown, sorted(allowed))
        return None, None
    others = tuple(sorted(allowed - set(learner_cpus)))
    return tuple(sorted(set(learner_cpus))), others or None


def server_threads(asked: int) -> int:
    """Threads for a spawned advisor server: ``asked``, or one per 4 usable cores (at least 1).

    More than the usable cores warns once (``resources.server_threads``) and uses the cores.
    """
    cores = usable_cores()
    if asked > cores:
        log.warning("resources.server_threads: %d asked for, but this process may use %d cores; using %d",
                    asked, cores, cores)
        return cores
    return asked or max(1, cores // 4)


def pin_learner(cpus: Sequence[int] | None) -> None:
    """Pin this process (the learner) to ``cpus`` (from :func:`split_cpus`); call it after every
    child process started, so none inherits it."""
    if cpus:
        os.sched_setaffinity(0, set(cpus))


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) process ``pid`` has used; None once it is gone."""
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system
