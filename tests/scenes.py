"""Hand-built worlds for tests: straight roads, boxes, stop lines and a scripted backend.

Infractions, rewards, the expert, the env and the BEV renderer are checked on scenes whose
right answer is known by hand; these builders make such scenes in a few lines without a
simulator. Frame: CARLA's (x east, y south). Two roads:

- the two-lane road (:func:`straight_road`, :func:`snapshot`, :class:`ScriptedBackend`) runs
  east along x from ``-ROAD_MARGIN_M`` to ``length_m + ROAD_MARGIN_M``; lane ``"east"``
  (centre y = +1.75, the right-hand lane for eastbound traffic) and lane ``"west"`` (centre
  y = -1.75) are 3.5 m wide, so the road spans y in [-3.5, 3.5];
- the four-lane road of the BEV tests (:func:`four_lane_road`, :func:`four_lane_snapshot`):
  y in [-7, 7], x in [-200, 200]; solid edges at y = ±7, a solid centre line at y = 0, broken
  lane lines at y = ±3.5. The ego's lane centre is again y = 1.75; its route runs along it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from found_rl.actions import Controls, RoadOption
from found_rl.sim.vehicle_dynamics import VehicleState, step_vehicle
from found_rl.world import (
    STEP_S,
    ActorBoxes,
    EgoState,
    Lane,
    LightState,
    MapGeometry,
    Polyline,
    Route,
    StopLines,
    WorldSnapshot,
)

LANE_WIDTH_M = 3.5
EAST_LANE_Y = 1.75
ROAD_MARGIN_M = 20.0
EGO_HALF_EXTENT = np.array([2.4, 1.0])


def straight_road(length_m: float = 200.0) -> MapGeometry:
    """A straight two-way road, one lane each way, east lane ending at ``x = length_m``."""
    x0, x1 = -ROAD_MARGIN_M, length_m + ROAD_MARGIN_M
    road = np.array([[x0, -LANE_WIDTH_M], [x1, -LANE_WIDTH_M], [x1, LANE_WIDTH_M], [x0, LANE_WIDTH_M]])
    east = Lane("east", np.array([[x0, EAST_LANE_Y], [length_m, EAST_LANE_Y]]), LANE_WIDTH_M)
    west = Lane("west", np.array([[x1, -EAST_LANE_Y], [x0, -EAST_LANE_Y]]), LANE_WIDTH_M)
    return MapGeometry(
        map_id=f"straight-road-{length_m:g}",
        road_polygons=(road,),
        solid_markings=(Polyline(np.array([[x0, 0.0], [x1, 0.0]])),),
        broken_markings=(),
        lanes={"east": east, "west": west},
        bounds=(x0, -LANE_WIDTH_M, x1, LANE_WIDTH_M),
    )


def straight_route(length_m: float = 100.0, spacing_m: float = 1.0) -> Route:
    """A route along the east lane from ``x = 0`` to ``x = length_m``."""
    x = np.linspace(0.0, length_m, round(length_m / spacing_m) + 1)
    xy = np.stack([x, np.full_like(x, EAST_LANE_Y)], axis=1)
    commands = np.full(len(x), int(RoadOption.LANEFOLLOW), dtype=np.int8)
    return Route("straight", xy, np.zeros(len(x)), commands, ("east",) * len(x), float(length_m))


def l_route() -> Route:
    """East 50 m from the origin, then south (CARLA +y) 50 m: a right turn at (50, 0)."""
    east = np.stack([np.arange(0.0, 51.0), np.zeros(51)], axis=1)
    south = np.stack([np.full(50, 50.0), np.arange(1.0, 51.0)], axis=1)
    xy = np.concatenate([east, south])
    yaw = np.concatenate([np.zeros(51), np.full(50, 90.0)])
    commands = np.full(len(xy), int(RoadOption.LANEFOLLOW), dtype=np.int8)
    return Route("L", xy, yaw, commands, ("a",) * len(xy), 100.0)


def boxes(
    xy: Sequence[Sequence[float]],
    yaw_deg: Sequence[float] | None = None,
    half_extent: Sequence[float] = (2.4, 1.0),
    velocity_xy: Sequence[Sequence[float]] | None = None,
    prefix: str = "actor",
) -> ActorBoxes:
    """Oriented boxes at ``xy`` (all of one size), ids ``<prefix>0, <prefix>1, ...``."""
    n = len(xy)
    if n == 0:
        return ActorBoxes.empty()
    return ActorBoxes(
        ids=tuple(f"{prefix}{i}" for i in range(n)),
        xy=np.asarray(xy, dtype=np.float64).reshape(n, 2),
        yaw_deg=np.zeros(n) if yaw_deg is None else np.asarray(yaw_deg, dtype=np.float64),
        half_extent=np.tile(np.asarray(half_extent, dtype=np.float64), (n, 1)),
        velocity_xy=np.zeros((n, 2)) if velocity_xy is None else np.asarray(velocity_xy, dtype=np.float64),
    )


def stop_line(x_m: float, state: LightState, light_id: str = "light0", lane_id: str = "east") -> StopLines:
    """One stop line across the east lane at ``x = x_m``."""
    segment = np.array([[[x_m, EAST_LANE_Y - LANE_WIDTH_M / 2], [x_m, EAST_LANE_Y + LANE_WIDTH_M / 2]]])
    return StopLines(
        ids=(light_id,),
        lane_ids=(lane_id,),
        segments=segment,
        states=np.array([int(state)], dtype=np.int8),
        remaining_s=np.array([10.0]),
        phase_s=np.array([20.0]),
    )


def snapshot(
    step: int,
    ego_xy: Sequence[float],
    *,
    yaw_deg: float = 0.0,
    speed_mps: float = 0.0,
    steer: float = 0.0,
    lane_id: str | None = "east",
    vehicles: ActorBoxes | None = None,
    walkers: ActorBoxes | None = None,
    traffic_lights: StopLines | None = None,
    stop_signs: StopLines | None = None,
    route: Route | None = None,
    map_geometry: MapGeometry | None = None,
) -> WorldSnapshot:
    """A world at ``step`` with the ego at ``ego_xy`` driving along its heading."""
    yaw = np.deg2rad(yaw_deg)
    ego = EgoState(
        xy=np.asarray(ego_xy, dtype=np.float64),
        yaw_deg=float(yaw_deg),
        velocity_xy=speed_mps * np.array([np.cos(yaw), np.sin(yaw)]),
        half_extent=EGO_HALF_EXTENT.copy(),
        steer=steer,
        lane_id=lane_id,
    )
    return WorldSnapshot(
        step=step,
        time_s=round(step * STEP_S, 6),
        ego=ego,
        vehicles=vehicles if vehicles is not None else ActorBoxes.empty(),
        walkers=walkers if walkers is not None else ActorBoxes.empty(),
        traffic_lights=traffic_lights if traffic_lights is not None else StopLines.empty(),
        stop_signs=stop_signs if stop_signs is not None else StopLines.empty(),
        route=route if route is not None else straight_route(),
        map=map_geometry if map_geometry is not None else straight_road(),
    )


class ScriptedBackend:
    """A tiny deterministic world on :func:`straight_road` for env tests without SUMO.

    The ego is a kinematic bicycle starting at the route's start; oncoming cars drive west in
    the other lane at seed-drawn positions and speeds; an optional traffic light at
    ``light_x_m`` is red for the first ``red_s`` seconds of each 20 s cycle, then green.
    Route ``i`` is ``route_length_m + 20 i`` metres long.

    Args:
        num_routes: routes offered.
        route_length_m: length of route 0.
        oncoming_cars: cars in the west lane.
        light_x_m: position of the traffic light's stop line, or ``None`` for no light.
        red_s: red time per 20 s cycle.
    """

    CYCLE_S = 20.0

    def __init__(
        self,
        num_routes: int = 2,
        route_length_m: float = 100.0,
        oncoming_cars: int = 3,
        light_x_m: float | None = None,
        red_s: float = 10.0,
    ) -> None:
        self._num_routes = num_routes
        self._route_length_m = route_length_m
        self._oncoming_cars = oncoming_cars
        self._light_x_m = light_x_m
        self._red_s = red_s
        self._map = straight_road(route_length_m + 20.0 * num_routes + 50.0)
        self._route = straight_route(route_length_m)
        self._step = 0
        self._ego = VehicleState(0.0, EAST_LANE_Y, 0.0)
        self._steer = 0.0
        self._cars = ActorBoxes.empty()
        self.closed = False

    @property
    def map(self) -> MapGeometry:
        return self._map

    @property
    def num_routes(self) -> int:
        return self._num_routes

    def reset(self, *, seed: int, route_index: int | None = None) -> WorldSnapshot:
        rng = np.random.default_rng(seed)
        index = 0 if route_index is None else route_index
        self._route = self._route_with_id(index)
        self._step = 0
        self._ego = VehicleState(0.0, EAST_LANE_Y, 0.0)
        self._steer = 0.0
        n = self._oncoming_cars
        xs = rng.uniform(20.0, self._route_length_m, size=n)
        speeds = rng.uniform(2.0, 8.0, size=n)
        self._cars = boxes(
            np.stack([xs, np.full(n, -EAST_LANE_Y)], axis=1),
            np.full(n, 180.0),
            velocity_xy=np.stack([-speeds, np.zeros(n)], axis=1),
            prefix="car",
        )
        return self._snapshot()

    def step(self, controls: tuple[float, float, float]) -> WorldSnapshot:
        throttle, steer, brake = controls
        # The same ego model as the SUMO backend, so expert and env tests see one car.
        self._ego = step_vehicle(self._ego, Controls(throttle, steer, brake), STEP_S)
        self._steer = float(steer)
        cars = self._cars
        moved_xy = cars.xy + cars.velocity_xy * STEP_S
        self._cars = ActorBoxes(cars.ids, moved_xy, cars.yaw_deg, cars.half_extent, cars.velocity_xy)
        self._step += 1
        return self._snapshot(throttle, brake)

    def close(self) -> None:
        self.closed = True

    def _route_with_id(self, index: int) -> Route:
        route = straight_route(self._route_length_m + 20.0 * index)
        return Route(f"straight-{index}", route.xy, route.yaw_deg, route.commands, route.lane_ids, route.length_m)

    def _snapshot(self, throttle: float = 0.0, brake: float = 0.0) -> WorldSnapshot:
        lights = StopLines.empty()
        if self._light_x_m is not None:
            is_red = (self._step * STEP_S) % self.CYCLE_S < self._red_s
            lights = stop_line(self._light_x_m, LightState.RED if is_red else LightState.GREEN)
        state = self._ego
        yaw = np.deg2rad(state.yaw_deg)
        ego_xy = np.array([state.x_m, state.y_m])
        ego = EgoState(
            xy=ego_xy,
            yaw_deg=state.yaw_deg,
            velocity_xy=state.speed_mps * np.array([np.cos(yaw), np.sin(yaw)]),
            half_extent=EGO_HALF_EXTENT.copy(),
            throttle=float(throttle),
            steer=self._steer,
            brake=float(brake),
            lane_id="east" if abs(state.y_m - EAST_LANE_Y) < LANE_WIDTH_M / 2 else None,
            acceleration_mps2=state.accel_mps2,
        )
        return WorldSnapshot(
            step=self._step,
            time_s=round(self._step * STEP_S, 6),
            ego=ego,
            vehicles=self._cars,
            walkers=ActorBoxes.empty(),
            traffic_lights=lights,
            stop_signs=StopLines.empty(),
            route=self._route,
            map=self._map,
        )


# --- the four-lane road of the BEV tests -----------------------------------------------------
RED, YELLOW, GREEN = int(LightState.RED), int(LightState.YELLOW), int(LightState.GREEN)


def four_lane_road(map_id: str = "test-straight") -> MapGeometry:
    """The 400 m straight four-lane road described in the module docstring."""

    def line(y: float) -> Polyline:
        return Polyline(np.array([[-200.0, y], [200.0, y]]))

    return MapGeometry(
        map_id=map_id,
        road_polygons=(np.array([[-200.0, -7.0], [200.0, -7.0], [200.0, 7.0], [-200.0, 7.0]]),),
        solid_markings=(line(-7.0), line(7.0), line(0.0)),
        broken_markings=(line(-3.5), line(3.5)),
        bounds=(-200.0, -7.0, 200.0, 7.0),
    )


def four_lane_route() -> Route:
    """The eastbound route along the ego's lane, x from -100 to 150 m."""
    xs = np.arange(-100.0, 151.0)
    return Route(
        route_id="east",
        xy=np.stack([xs, np.full_like(xs, EAST_LANE_Y)], axis=1),
        yaw_deg=np.zeros(len(xs)),
        commands=np.full(len(xs), 4, np.int8),
        lane_ids=("lane",) * len(xs),
        length_m=float(len(xs) - 1),
    )


FOUR_LANE_MAP = four_lane_road()
FOUR_LANE_ROUTE = four_lane_route()


def standing_boxes(
    xy: Sequence[tuple[float, float]],
    yaw_deg: Sequence[float] | None = None,
    half_extent: tuple[float, float] = (2.3, 1.0),
    prefix: str = "a",
) -> ActorBoxes:
    """Standing boxes at ``xy`` (vehicle-sized by default), ids ``prefix0, prefix1, ...``."""
    return boxes(xy, yaw_deg, half_extent, prefix=prefix)


def stop_lines_at(
    segments: Sequence[tuple[tuple[float, float], tuple[float, float]]], states: Sequence[int]
) -> StopLines:
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


def four_lane_snapshot(
    ego_xy: tuple[float, float] = (0.0, EAST_LANE_Y),
    ego_yaw_deg: float = 0.0,
    vehicles: ActorBoxes | None = None,
    walkers: ActorBoxes | None = None,
    lights: StopLines | None = None,
    signs: StopLines | None = None,
    time_s: float = 0.0,
    geometry: MapGeometry | None = None,
    route: Route | None = None,
) -> WorldSnapshot:
    """A snapshot on the four-lane road (defaults: ego standing in its lane at x = 0, facing east)."""
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
        route=route if route is not None else FOUR_LANE_ROUTE,
        map=geometry if geometry is not None else FOUR_LANE_MAP,
    )
