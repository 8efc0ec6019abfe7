import threading

import numpy as np
import pytest

from vlm_server.running_stats import RunningMoments


def test_welford_matches_numpy_population_statistics():
    values = np.random.default_rng(0).normal(0.3, 0.2, size=500)
    moments = RunningMoments()
    for value in values:
        snapshot = moments.update(float(value))
    assert snapshot.count == 500
    assert snapshot.mean == pytest.approx(values.mean())
    assert snapshot.var == pytest.approx(values.var())


def test_concurrent_updates_lose_no_samples():
    moments = RunningMoments()

    def work():
        for _ in range(2000):
            moments.update(1.0)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert moments.snapshot() == (8000, 1.0, 0.0)
