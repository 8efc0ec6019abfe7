"""Who gets the CPU during training: the learner's core is the learner's.

The update is the loop's critical path (with the overlapped loop the workers step while it
runs), so everything beside it runs at a lower priority with few threads of its own: the clip
workers (:func:`niced`), a spawned advisor server (:func:`server_threads`, and its nice value
in :class:`~found_rl.train.server.SpawnedServer`) and the evaluation workers. A setting the
machine cannot honour warns once, names the setting and falls back.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
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


def _run_niced(increment: int, factory: Callable[[], Any]) -> Any:
    lower_priority(increment, "resources.worker_nice")
    return factory()


def niced(factory: Callable[[], Any], increment: int) -> Callable[[], Any]:
    """An env factory that first lowers the priority of the worker process it runs in."""
    return functools.partial(_run_niced, increment, factory)


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
    """Pin this process (the learner) to ``cpus``; call it after every child process started.

    CPUs this process may not use warn once (``resources.learner_cpus``) and nothing is pinned.
    """
    if not cpus:
        return
    try:
        allowed = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        log.warning("resources.learner_cpus: this platform cannot pin a process; not pinned")
        return
    unknown = sorted(set(cpus) - allowed)
    if unknown:
        log.warning("resources.learner_cpus: CPUs %s are not usable here (usable: %s); not pinned",
                    unknown, sorted(allowed))
        return
    os.sched_setaffinity(0, set(cpus))
