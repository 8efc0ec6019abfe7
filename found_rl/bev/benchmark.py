"""Micro-benchmark of :class:`BevRenderer` on synthetic town scenes (no simulator needed).

``time_render`` is what ``found-rl bench sim`` (or anyone) can call to report the BEV's share of
an env step; ``python -m found_rl.bev.benchmark [--json]`` prints a table by itself.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass

import cv2
import numpy as np

from found_rl.bev.config import BevConfig
from found_rl.bev.renderer import BevRenderer
from found_rl.sim.snapshot import (
    ActorBoxes,
    EgoState,
    LightState,
    MapGeometry,
    Polyline,
    Route,
    StopLines,
    WorldSnapshot,
)

TARGET_CASE = "town_50v_20w_20l"
TARGET_RENDER_MS = 0.2
"""Issue 14: the renderer alone at 50 vehicles, 20 walkers and 20 lights, per frame."""

_BLOCK_M = 80.0
_ROAD_HALF_WIDTH_M = 7.0
_LANE_WIDTH_M = 3.5


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


def grid_map(blocks: int = 5, map_id: str = "bench-grid") -> MapGeometry:
    """A square grid town: ``blocks + 1`` roads each way, 4 lanes, solid edges, broken dividers."""
    size_m = blocks * _BLOCK_M
    polygons, solid, broken = [], [], []
    ends = np.array([-_ROAD_HALF_WIDTH_M, size_m + _ROAD_HALF_WIDTH_M])
    for k in range(blocks + 1):
        axis_m = k * _BLOCK_M
        for is_east_west in (True, False):
            h = _ROAD_HALF_WIDTH_M
            polygons.append(
                np.concatenate(
                    [_road_line(ends, axis_m - h, is_east_west), _road_line(ends[::-1], axis_m + h, is_east_west)]
                )
            )
            solid += [Polyline(_road_line(ends, axis_m + offset, is_east_west)) for offset in (-h, h, 0.0)]
            broken += [
                Polyline(_road_line(ends, axis_m + offset, is_east_west)) for offset in (-_LANE_WIDTH_M, _LANE_WIDTH_M)
            ]
    return MapGeometry(
        map_id=map_id,
        road_polygons=tuple(polygons),
        solid_markings=tuple(solid),
        broken_markings=tuple(broken),
        bounds=(-_ROAD_HALF_WIDTH_M, -_ROAD_HALF_WIDTH_M, size_m + _ROAD_HALF_WIDTH_M, size_m + _ROAD_HALF_WIDTH_M),
    )


def _road_line(along_m: np.ndarray, across_m: float, is_east_west: bool) -> np.ndarray:
    """Points along a road axis: ``(along, across)`` as ``(x, y)`` east-west, ``(y, x)`` otherwise."""
    points = np.stack([along_m, np.full_like(along_m, across_m)], axis=1)
    return points if is_east_west else points[:, ::-1].copy()


def straight_route(start_xy: tuple[float, float], length_m: float, yaw_deg: float = 0.0) -> Route:
    """A 1 m spaced straight route (LANEFOLLOW)."""
    count = int(length_m) + 1
    yaw = math.radians(yaw_deg)
    steps = np.arange(count, dtype=np.float64)
    xy = np.stack([start_xy[0] + steps * math.cos(yaw), start_xy[1] + steps * math.sin(yaw)], axis=1)
    return Route(
        route_id="bench",
        xy=xy,
        yaw_deg=np.full(count, yaw_deg),
        commands=np.full(count, 4, np.int8),
        lane_ids=("bench_0",) * count,
        length_m=float(count - 1),
    )


def synthetic_scene(
    rng: np.random.Generator,
    num_vehicles: int = 50,
    num_walkers: int = 20,
    num_stop_lines: int = 20,
    spread_m: float = 120.0,
    steps: int = 40,
) -> list[WorldSnapshot]:
    """``steps`` consecutive snapshots of an ego driving east through a grid town.

    Vehicles sit in lane slots 6.5 m apart (a dense queue, never overlapping) and move with
    their lane at one speed; walkers walk on the sidewalks; stop lines lie across random lanes.
    Everything is scattered in a ``spread_m`` square around the middle of the ego's drive,
    which starts 12 m before a junction; ``spread_m = 36`` keeps almost all of it in view.
    """
    geometry = grid_map()
    lane_offsets_m = np.array([-1.5, -0.5, 0.5, 1.5]) * _LANE_WIDTH_M  # >0: east/southbound
    junction_x = 2 * _BLOCK_M
    road_y = 2 * _BLOCK_M
    ego_speed_mps = 5.0
    ego_start = np.array([junction_x - 12.0, road_y + lane_offsets_m[2]])
    route = straight_route((junction_x - _BLOCK_M, ego_start[1]), 2 * _BLOCK_M)
    centre = ego_start + [ego_speed_mps * 0.05 * steps, 0.0]
    low, high = centre - spread_m / 2, centre + spread_m / 2

    def lane_points(offsets_m: np.ndarray, spacing_m: float) -> tuple[np.ndarray, np.ndarray]:
        """Positions and headings along every road's lanes (or sidewalks) in the square."""
        xy, yaw = [], []
        along = np.arange(-_BLOCK_M, 6 * _BLOCK_M, spacing_m)
        for road in range(6):
            base = road * _BLOCK_M
            for offset in offsets_m:
                heading = 0.0 if offset > 0 else 180.0
                xy.append(np.stack([along, np.full_like(along, base + offset)], axis=1))  # east-west
                yaw.append(np.full(len(along), heading))
                xy.append(np.stack([np.full_like(along, base - offset), along], axis=1))  # north-south
                yaw.append(np.full(len(along), heading + 90.0))
        xy, yaw = np.concatenate(xy), np.concatenate(yaw)
        to_road = np.abs((xy + _BLOCK_M / 2) % _BLOCK_M - _BLOCK_M / 2)  # distance to the nearest road axis
        in_junction = np.all(to_road < _ROAD_HALF_WIDTH_M + 1.0, axis=1)
        inside = np.all((xy >= low) & (xy <= high), axis=1) & ~in_junction
        return xy[inside], yaw[inside]

    def pick(count: int, xy: np.ndarray, yaw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        chosen = rng.choice(len(xy), size=min(count, len(xy)), replace=False)
        return xy[chosen], yaw[chosen]

    def actors(xy: np.ndarray, yaw: np.ndarray, half_extent: tuple[float, float], speed_mps: float) -> tuple:
        heading = np.stack([np.cos(np.deg2rad(yaw)), np.sin(np.deg2rad(yaw))], axis=1)
        return xy, yaw, np.tile(half_extent, (len(xy), 1)), speed_mps * heading

    slots_xy, slots_yaw = lane_points(lane_offsets_m, 6.5)
    not_ego_lane = np.hypot(*(slots_xy - ego_start).T) > 8.0
    vehicles = actors(*pick(num_vehicles, slots_xy[not_ego_lane], slots_yaw[not_ego_lane]), (2.3, 1.0), 4.0)
    walkers = actors(*pick(num_walkers, *lane_points(np.array([-8.5, 8.5]), 1.0)), (0.25, 0.25), 1.3)
    line_xy, line_yaw = pick(num_stop_lines, slots_xy, slots_yaw)
    across = np.stack([-np.sin(np.deg2rad(line_yaw)), np.cos(np.deg2rad(line_yaw))], axis=1) * _LANE_WIDTH_M / 2
    segments = np.stack([line_xy - across, line_xy + across], axis=1)
    line_ids = tuple(f"tl{k}" for k in range(len(line_xy)))
    cycle = (LightState.RED, LightState.GREEN, LightState.YELLOW)

    def boxes(spec: tuple, prefix: str, time_s: float) -> ActorBoxes:
        xy, yaw, half_extent, velocity = spec
        ids = tuple(f"{prefix}{k}" for k in range(len(xy)))
        return ActorBoxes(ids, xy + velocity * time_s, yaw, half_extent, velocity)

    snapshots = []
    for step in range(steps):
        time_s = 0.1 * step
        states = np.array([cycle[(k + step // 20) % 3] for k in range(len(line_ids))], np.int8)
        ego = EgoState(
            xy=ego_start + [ego_speed_mps * time_s, 0.0],
            yaw_deg=0.0,
            velocity_xy=np.array([ego_speed_mps, 0.0]),
            half_extent=np.array([2.4, 1.0]),
        )
        remaining_s = np.full(len(line_ids), 5.0)
        lights = StopLines(line_ids, line_ids, segments, states, remaining_s, np.full(len(line_ids), 10.0))
        snapshots.append(
            WorldSnapshot(
                step=step,
                time_s=time_s,
                ego=ego,
                vehicles=boxes(vehicles, "v", time_s),
                walkers=boxes(walkers, "w", time_s),
                traffic_lights=lights,
                stop_signs=StopLines.empty(),
                route=route,
                map=geometry,
            )
        )
    return snapshots


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m found_rl.bev.benchmark", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--seconds", type=float, default=2.0, help="minimum timing time per case")
    args = parser.parse_args(argv)
    cases = {
        "empty": {"num_vehicles": 0, "num_walkers": 0, "num_stop_lines": 0},
        "town_50v_20w_20l": {"spread_m": 120.0},
        "dense_50v_20w_20l": {"spread_m": 60.0},
        "town_150v_40w_40l": {"num_vehicles": 150, "num_walkers": 40, "num_stop_lines": 40, "spread_m": 200.0},
    }
    from found_rl.bench.load import describe_load, load_average, numpy_call_us

    numpy_us = numpy_call_us()
    results = {name: time_render(min_seconds=args.seconds, **kwargs) for name, kwargs in cases.items()}
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


if __name__ == "__main__":
    raise SystemExit(main())
