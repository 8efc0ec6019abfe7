"""Who gets the CPU: settings the machine cannot honour warn once, name the setting and fall back."""

from __future__ import annotations

import logging
import multiprocessing
import os

import pytest

from found_rl.train.resources import Placement, lower_priority, placed, server_threads, split_cpus, usable_cores


def own_nice() -> int:
    return os.nice(0)


def own_placement() -> tuple[int, set[int]]:
    return os.nice(0), os.sched_getaffinity(0)


def report_placement(queue, cpus) -> None:
    queue.put(placed(own_placement, Placement("resources.worker_nice", 3, cpus))())


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux-only")
def test_a_placed_factory_lowers_the_priority_and_sets_the_cpus_of_the_worker_it_runs_in():
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    cpus = (min(os.sched_getaffinity(0)),)
    child = context.Process(target=report_placement, args=(queue, cpus))
    child.start()
    child.join(30)
    assert queue.get(timeout=5) == (os.nice(0) + 3, set(cpus))  # the worker's, not ours
    assert child.exitcode == 0


def test_a_refused_priority_change_warns_naming_the_setting(monkeypatch, caplog):
    def refuse(increment):
        raise PermissionError("not allowed")

    monkeypatch.setattr(os, "nice", refuse)
    with caplog.at_level(logging.WARNING):
        lower_priority(5, "resources.worker_nice")
    assert "resources.worker_nice" in caplog.text


def test_more_server_threads_than_cores_warn_and_use_the_cores(caplog):
    with caplog.at_level(logging.WARNING):
        assert server_threads(usable_cores() + 3) == usable_cores()
    assert "resources.server_threads" in caplog.text
    assert server_threads(0) == max(1, usable_cores() // 4)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="pinning is Linux-only")
def test_pinning_to_cpus_this_process_cannot_use_warns_and_pins_nothing(caplog):
    allowed = os.sched_getaffinity(0)
    with caplog.at_level(logging.WARNING):
        assert split_cpus([max(allowed) + 64]) == (None, None)
    assert "resources.learner_cpus" in caplog.text


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="pinning is Linux-only")
def test_the_learners_cpus_are_kept_from_everyone_else():
    allowed = sorted(os.sched_getaffinity(0))
    assert split_cpus(None) == (None, None)
    assert split_cpus(allowed) == (tuple(allowed), None)  # every CPU to the learner: nobody restricted
    if len(allowed) > 1:
        assert split_cpus([allowed[-1]]) == ((allowed[-1],), tuple(allowed[:-1]))


def test_process_cpu_seconds_reads_a_live_process_and_none_once_it_is_gone():
    import subprocess
    import sys

    from found_rl.train.resources import process_cpu_seconds

    assert process_cpu_seconds(os.getpid()) > 0
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_cpu_seconds(child.pid) is None  # reaped: no such process
