"""``found-rl bench bev``: the BEV renderer alone, on synthetic town scenes (no simulator needed).

``time_render`` is what ``found-rl bench sim`` (or anyone) can call to report the BEV's share of
an env step; the command times it on four scenes of growing density (``bench.bev_scenes``) and
prints a table, or one JSON object with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from found_rl.argtypes import finite_float
from found_rl.bench.load import describe_load, load_average, numpy_call_us

if TYPE_CHECKING:
    from found_rl.bev.config import BevConfig

TARGET_CASE = "town_50v_20w_20l"
TARGET_RENDER_MS = 0.2
"""Issue 14: the renderer alone at 50 vehicles, 20 walkers and 20 lights, per frame."""

CASES: dict[str, dict[str, float]] = {
    "empty": {"num_vehicles": 0, "num_walkers": 0, "num_stop_lines": 0},
    "town_50v_20w_20l": {"spread_m": 120.0},
    "dense_50v_20w_20l": {"spread_m": 60.0},
    "town_150v_40w_40l": {"num_vehicles": 150, "num_walkers": 40, "num_stop_lines": 40, "spread_m": 200.0},
}
"""The scenes timed, by name: :func:`time_render` arguments."""


@dataclass(frozen=True)
class RenderTiming:
    """Per-call times, milliseconds, over many calls.

    ``render_ms_*`` are wall-clock; ``render_cpu_ms_median`` counts only the CPU time of the
    calling thread, which stays meaningful on a machine shared with other jobs.
    """

    render_ms_median: float
    render_ms_p90: float
    render_cpu_ms_median: float
    render_rgb_ms_median: float
    renders: int
    vehicles: int
    walkers: int
    stop_lines: int
    spread_m: float


def time_render(
    config: BevConfig | None = None,
    num_vehicles: int = 50,
    num_walkers: int = 20,
    num_stop_lines: int = 20,
    spread_m: float = 120.0,
    min_seconds: float = 1.0,
    seed: int = 0,
) -> RenderTiming:
    """Median and p90 time of :meth:`BevRenderer.render` (and of ``render_rgb``) on one thread.

    The static raster is built before timing starts (it is built once per map in real use).
    """
    import cv2
    import numpy as np

    from found_rl.bench.bev_scenes import synthetic_scene
    from found_rl.bev import BevConfig, BevRenderer

    cv2.setNumThreads(1)
    snapshots = synthetic_scene(np.random.default_rng(seed), num_vehicles, num_walkers, num_stop_lines, spread_m)
    renderer = BevRenderer(snapshots[0].map, config or BevConfig())
    render_s: list[float] = []
    render_cpu_s: list[float] = []
    rgb_s: list[float] = []
    started = time.perf_counter()
    while time.perf_counter() - started < min_seconds or len(render_s) < 2 * len(snapshots):
        renderer.reset()
        for snapshot in snapshots:
            tic, tic_cpu = time.perf_counter(), time.thread_time()
            renderer.render(snapshot)
            render_cpu_s.append(time.thread_time() - tic_cpu)
            render_s.append(time.perf_counter() - tic)
        tic = time.perf_counter()
        renderer.render_rgb()
        rgb_s.append(time.perf_counter() - tic)
    render_ms = np.array(render_s) * 1e3
    return RenderTiming(
        render_ms_median=float(np.median(render_ms)),
        render_ms_p90=float(np.percentile(render_ms, 90)),
        render_cpu_ms_median=float(np.median(render_cpu_s) * 1e3),
        render_rgb_ms_median=float(np.median(rgb_s) * 1e3),
        renders=len(render_s),
        vehicles=num_vehicles,
        walkers=num_walkers,
        stop_lines=num_stop_lines,
        spread_m=spread_m,
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seconds", type=finite_float(0, inclusive=False), default=2.0, help="minimum timing time per case"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    numpy_us = numpy_call_us()
    results = {name: time_render(min_seconds=args.seconds, **kwargs) for name, kwargs in CASES.items()}
    target_ms = results[TARGET_CASE].render_ms_median
    is_met = target_ms <= TARGET_RENDER_MS
    if args.json:
        report: dict = {name: asdict(timing) for name, timing in results.items()}
        report.update(
            target_case=TARGET_CASE,
            target_render_ms=TARGET_RENDER_MS,
            target_met=is_met,
            numpy_call_us=numpy_us,
            load_average=load_average(),
        )
        print(json.dumps(report))
        return 0
    print(f"{'case':<22}{'render ms':>10}{'p90 ms':>8}{'cpu ms':>8}{'renders/s':>11}{'vs empty':>9}{'rgb ms':>8}")
    empty_ms = results["empty"].render_ms_median
    for name, timing in results.items():
        print(
            f"{name:<22}{timing.render_ms_median:>10.3f}{timing.render_ms_p90:>8.3f}"
            f"{timing.render_cpu_ms_median:>8.3f}{1e3 / timing.render_ms_median:>11.0f}"
            f"{timing.render_ms_median / empty_ms:>9.2f}{timing.render_rgb_ms_median:>8.3f}"
        )
    print(describe_load(numpy_us, load_average()))
    verdict = "met" if is_met else f"NOT met ({target_ms:.3f} ms)"
    print(f"target (<= {TARGET_RENDER_MS} ms per render, {TARGET_CASE}, one quiet core): {verdict}")
    return 0
