"""Hand-built snapshots for tests, examples and debugging: a straight road, the ego driving east.

Road: y in [-7, 7] (y is south), x in [-200, 200]; solid edges at y = +-7, a solid centre line
at y = 0, broken lane lines at y = +-3.5. The ego's lane centre is y = 1.75 (south of the
centre line, i.e. the right-hand side when driving east). Route: along y = 1.75, 1 m spacing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from found_rl import testing
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

LANE_Y = 1.75


def straight_road_map(map_id: str = "test-straight") -> MapGeometry:
    """The 400 m straight four-lane road described above."""

    def line(y: float) -> Polyline:
        return Polyline(np.array([[-200.0, y], [200.0, y]]))

    return MapGeometry(
        map_id=map_id,
        road_polygons=(np.array([[-200.0, -7.0], [200.0, -7.0], [200.0, 7.0], [-200.0, 7.0]]),),
        solid_markings=(line(-7.0), line(7.0), line(0.0)),
        broken_markings=(line(-3.5), line(3.5)),
        bounds=(-200.0, -7.0, 200.0, 7.0),
    )


def east_route() -> Route:
    """The eastbound route along the ego's lane, x from -100 to 150 m."""
    xs = np.arange(-100.0, 151.0)
    return Route(
        route_id="east",
        xy=np.stack([xs, np.full_like(xs, LANE_Y)], axis=1),
        yaw_deg=np.zeros(len(xs)),
        commands=np.full(len(xs), 4, np.int8),
        lane_ids=("lane",) * len(xs),
        length_m=float(len(xs) - 1),
    )


def boxes(
    xy: Sequence[tuple[float, float]],
    yaw_deg: Sequence[float] | None = None,
    half_extent: tuple[float, float] = (2.3, 1.0),
    prefix: str = "a",
) -> ActorBoxes:
    """Standing boxes at ``xy`` (vehicle-sized by default), ids ``prefix0, prefix1, ...``."""
    return testing.boxes(xy, yaw_deg, half_extent, prefix=prefix)


def stop_lines(segments: Sequence[tuple[tuple[float, float], tuple[float, float]]], states: Sequence[int]) -> StopLines:
    """Stop lines with the given :class:`LightState` codes and unknown phase timing."""
    count = len(segments)
    return StopLines(
        ids=tuple(f"s{k}" for k in range(count)),
        lane_ids=("lane",) * count,
        segments=np.asarray(segments, dtype=np.float64).reshape(-1, 2, 2),
        states=np.asarray(states, dtype=np.int8),
        remaining_s=np.full(count, np.inf),
        phase_s=np.full(count, np.inf),
    )


MAP = straight_road_map()
ROUTE = east_route()
RED, YELLOW, GREEN = int(LightState.RED), int(LightState.YELLOW), int(LightState.GREEN)


def snapshot(
    ego_xy: tuple[float, float] = (0.0, LANE_Y),
    ego_yaw_deg: float = 0.0,
    vehicles: ActorBoxes | None = None,
    walkers: ActorBoxes | None = None,
    lights: StopLines | None = None,
    signs: StopLines | None = None,
    time_s: float = 0.0,
    geometry: MapGeometry | None = None,
    route: Route | None = None,
) -> WorldSnapshot:
    """A snapshot on the straight road (defaults: ego standing in its lane at x = 0, facing east)."""
    return WorldSnapshot(
        step=round(time_s * 10),
        time_s=time_s,
        ego=EgoState(
            xy=np.asarray(ego_xy, dtype=np.float64),
            yaw_deg=ego_yaw_deg,
            velocity_xy=np.zeros(2),
            half_extent=np.array([2.4, 1.0]),
        ),
        vehicles=vehicles if vehicles is not None else ActorBoxes.empty(),
        walkers=walkers if walkers is not None else ActorBoxes.empty(),
        traffic_lights=lights if lights is not None else StopLines.empty(),
        stop_signs=signs if signs is not None else StopLines.empty(),
        route=route if route is not None else ROUTE,
        map=geometry if geometry is not None else MAP,
    )
