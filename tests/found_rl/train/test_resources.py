"""Who gets the CPU: settings the machine cannot honour warn once, name the setting and fall back."""

from __future__ import annotations

import logging
import multiprocessing
import os

import pytest

from found_rl.train.resources import lower_priority, niced, pin_learner, server_threads, usable_cores


def own_nice() -> int:
    return os.nice(0)


def report_nice(queue) -> None:
    queue.put(niced(own_nice, 3)())


def test_a_niced_factory_lowers_the_priority_of_the_worker_it_runs_in():
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=report_nice, args=(queue,))
    child.start()
    child.join(30)
    assert queue.get(timeout=5) == os.nice(0) + 3  # the worker's, not ours
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
    before = os.sched_getaffinity(0)
    with caplog.at_level(logging.WARNING):
        pin_learner([max(before) + 64])
    assert "resources.learner_cpus" in caplog.text
    assert os.sched_getaffinity(0) == before
