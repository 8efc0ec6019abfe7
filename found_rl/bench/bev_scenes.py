"""Synthetic grid-town snapshots for the BEV benchmark (no simulator needed).

A square grid town of 4-lane roads, an ego driving east through a junction, and vehicles,
walkers and stop lines scattered around it in numbers the benchmark chooses. These scenes
measure the renderer's cost; the hand-built scenes whose pixels the tests check are in
``tests/scenes.py``.
"""

from __future__ import annotations

import math

import numpy as np

from found_rl.world import ActorBoxes, EgoState, LightState, MapGeometry, Polyline, Route, StopLines, WorldSnapshot

_BLOCK_M = 80.0
_ROAD_HALF_WIDTH_M = 7.0
_LANE_WIDTH_M = 3.5


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
