"""How busy the machine is while a benchmark runs, printed beside its numbers.

On a shared machine the same code runs several times slower when other jobs hold the cores;
these two probes say how far a run was from a quiet core.
"""

from __future__ import annotations

import os
import time


def numpy_call_us() -> float:
    """Median wall time of one trivial numpy call, microseconds: how slow this machine is now.

    About 0.5 us on a quiet modern core; most of a step is calls of this kind, so the ratio to
    that scales the step times to a quiet core roughly.
    """
    import numpy as np

    a, b, out = np.ones(4), np.ones(4), np.empty(4)
    samples = []
    for _ in range(200):
        start = time.perf_counter()
        for _ in range(50):
            np.add(a, b, out=out)
        samples.append((time.perf_counter() - start) / 50)
    return 1e6 * float(np.median(samples))


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (``None`` where the OS has none)."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def describe_load(numpy_us: float, load: list[float] | None) -> str:
    """One line for a report: the numpy-call probe and the load average against the CPU count."""
    averages = "unknown" if load is None else " / ".join(f"{value:.2f}" for value in load) + " (1 / 5 / 15 min)"
    return (
        f"one trivial numpy call took {numpy_us:.2f} us (about 0.5 us on a quiet core); "
        f"load average {averages} on {os.cpu_count()} CPUs"
    )
