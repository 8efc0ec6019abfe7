"""Hazard geometry on hand-built scenes; every expected distance is worked out by hand.

Scene: the ego (half-length 2.4 m, half-width 1.0 m) at the origin heading east on a 1 m spaced
route along y = 0; CARLA frame (y is south, so +y is the ego's right).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from found_rl import hazards
from found_rl.hazards import corridor, crossings, geometry
from found_rl.world import (
    ActorBoxes,
    EgoState,
    LightState,
    MapGeometry,
    Route,
    StopLines,
    WorldSnapshot,
)

EGO_HALF_LENGTH = 2.4


def route_from(xy: np.ndarray) -> Route:
    xy = np.asarray(xy, dtype=np.float64)
    step = np.diff(xy, axis=0)
    yaw = np.degrees(np.arctan2(step[:, 1], step[:, 0]))
    yaw = np.append(yaw, yaw[-1])
    return Route("r", xy, yaw, np.full(len(xy), 4, np.int8), ("lane",) * len(xy), float(np.hypot(*step.T).sum()))


STRAIGHT = route_from(np.stack([np.arange(-20.0, 101.0), np.zeros(121)], axis=1))
START = 20  # index of the waypoint at x = 0


def actors(xy, yaw_deg=None, half_extent=(2.3, 1.0), velocity=None, prefix="a") -> ActorBoxes:
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    count = len(xy)
    return ActorBoxes(
        tuple(f"{prefix}{k}" for k in range(count)),
        xy,
        np.zeros(count) if yaw_deg is None else np.asarray(yaw_deg, dtype=np.float64),
        np.tile(half_extent, (count, 1)).astype(np.float64),
        np.zeros((count, 2)) if velocity is None else np.asarray(velocity, dtype=np.float64).reshape(-1, 2),
    )


def lines(segments, states, remaining_s=math.inf, phase_s=math.inf) -> StopLines:
    count = len(segments)
    return StopLines(
        tuple(f"l{k}" for k in range(count)),
        tuple(f"lane{k}" for k in range(count)),
        np.asarray(segments, dtype=np.float64).reshape(-1, 2, 2),
        np.asarray(states, dtype=np.int8),
        np.full(count, remaining_s),
        np.full(count, phase_s),
    )


def scene(vehicles=None, walkers=None, lights=None, signs=None, route=STRAIGHT, ego_xy=(0.0, 0.0), ego_yaw_deg=0.0):
    return WorldSnapshot(
        step=0,
        time_s=0.0,
        ego=EgoState(np.asarray(ego_xy, dtype=np.float64), ego_yaw_deg, np.zeros(2), np.array([EGO_HALF_LENGTH, 1.0])),
        vehicles=vehicles or ActorBoxes.empty(),
        walkers=walkers or ActorBoxes.empty(),
        traffic_lights=lights or StopLines.empty(),
        stop_signs=signs or StopLines.empty(),
        route=route,
        map=MapGeometry("m", (), (), ()),
    )


# --- nearest_route_index ---------------------------------------------------------------------


def test_nearest_route_index_finds_the_closest_waypoint():
    assert hazards.nearest_route_index(STRAIGHT, np.array([17.3, 0.8])) == START + 17


def test_nearest_route_index_with_hint_ignores_a_far_part_of_a_looping_route():
    # Out along y = 0 for 40 m, then back along y = 3: near x = 5 both legs are close.
    out = np.stack([np.arange(0.0, 41.0), np.zeros(41)], axis=1)
    back = np.stack([np.arange(40.0, -1.0, -1.0), np.full(41, 3.0)], axis=1)
    loop = route_from(np.concatenate([out, back]))
    point = np.array([5.0, 1.6])  # slightly nearer the return leg
    assert hazards.nearest_route_index(loop, point) == 41 + 35
    assert hazards.nearest_route_index(loop, point, hint=4, window=10) == 5


# --- leading vehicle -------------------------------------------------------------------------


def test_leader_gap_is_bumper_to_bumper_along_the_route():
    leader = hazards.leading_vehicle(scene(vehicles=actors([(15.0, 0.0)], velocity=[(3.0, 0.0)])), START)
    assert leader is not None and leader.actor_id == "a0" and leader.index == 0
    assert leader.distance_m == pytest.approx(15.0 - 2.3 - EGO_HALF_LENGTH, abs=1e-6)
    assert leader.speed_along_route_mps == pytest.approx(3.0)


def test_nearest_of_several_vehicles_leads():
    snap = scene(vehicles=actors([(30.0, 0.0), (12.0, 0.2), (-10.0, 0.0)]))
    leader = hazards.leading_vehicle(snap, START)
    assert leader.actor_id == "a1"
    assert leader.distance_m == pytest.approx(12.0 - 2.3 - EGO_HALF_LENGTH, abs=1e-6)


@pytest.mark.parametrize(
    "xy",
    [
        (15.0, 3.5),  # in the next lane (its near side 2.5 m away, the ego corridor 1 m)
        (-12.0, 0.0),  # behind
        (60.0, 0.0),  # beyond the 40 m horizon
    ],
)
def test_vehicles_off_the_corridor_ahead_do_not_lead(xy):
    assert hazards.leading_vehicle(scene(vehicles=actors([xy])), START) is None


def test_vehicle_across_the_corridor_leads():
    # A crossing car at a junction, perpendicular to the route, wider than the corridor.
    leader = hazards.leading_vehicle(scene(vehicles=actors([(10.0, 0.5)], yaw_deg=[90.0])), START)
    assert leader is not None
    assert leader.distance_m == pytest.approx(10.0 - 1.0 - EGO_HALF_LENGTH, abs=1e-6)
    assert leader.speed_along_route_mps == pytest.approx(0.0)


def test_leader_after_a_right_turn_is_measured_along_the_route():
    # 10 m east, then a right turn: 20 m south (y grows). Vehicle 10 m down the southward leg.
    east = np.stack([np.arange(0.0, 11.0), np.zeros(11)], axis=1)
    south = np.stack([np.full(20, 10.0), np.arange(1.0, 21.0)], axis=1)
    turn = route_from(np.concatenate([east, south]))
    snap = scene(vehicles=actors([(10.0, 10.0)], yaw_deg=[90.0]), route=turn)
    leader = hazards.leading_vehicle(snap, 0)
    assert leader is not None
    assert leader.distance_m == pytest.approx(20.0 - 2.3 - EGO_HALF_LENGTH, abs=0.05)


def test_no_vehicles_no_leader():
    assert hazards.leading_vehicle(scene(), START) is None


# --- walkers ---------------------------------------------------------------------------------


def test_walker_in_path_vs_beside_the_path():
    walkers = actors([(8.0, 2.0), (8.0, 4.0), (-6.0, 0.0), (15.0, -1.0)], half_extent=(0.25, 0.25))
    found = hazards.walkers_in_path(scene(walkers=walkers), START)
    # (8, 2) reaches to y = 1.75 < 2.5: in the corridor; (8, 4) on the sidewalk: not; (-6, 0) behind.
    assert [w.actor_id for w in found] == ["a0", "a3"]
    assert found[0].distance_m == pytest.approx(8.0 - 0.25 - EGO_HALF_LENGTH, abs=1e-6)
    assert found[1].distance_m == pytest.approx(15.0 - 0.25 - EGO_HALF_LENGTH, abs=1e-6)


def test_walker_corridor_width_is_a_parameter():
    walkers = actors([(8.0, 2.0)], half_extent=(0.25, 0.25))
    assert hazards.walkers_in_path(scene(walkers=walkers), START, corridor_half_width_m=1.5) == []


# --- traffic lights and stop signs -----------------------------------------------------------

ACROSS_LANE_AT_20 = ((20.0, -1.75), (20.0, 1.75))


def test_light_distance_is_from_the_bumper_to_the_stop_line():
    snap = scene(lights=lines([ACROSS_LANE_AT_20], [LightState.RED], remaining_s=5.0, phase_s=20.0))
    light = hazards.affecting_light(snap, START)
    assert light is not None and light.light_id == "l0" and light.lane_id == "lane0" and light.index == 0
    assert light.state == LightState.RED
    assert light.distance_m == pytest.approx(20.0 - EGO_HALF_LENGTH)
    assert light.remaining_ratio == pytest.approx(0.25)


def test_first_crossed_light_wins_and_unknown_phase_is_minus_one():
    snap = scene(
        lights=lines([((35.0, -1.75), (35.0, 1.75)), ACROSS_LANE_AT_20], [LightState.GREEN, LightState.YELLOW])
    )
    light = hazards.affecting_light(snap, START)
    assert light.light_id == "l1" and light.state == LightState.YELLOW
    assert light.remaining_ratio == -1.0


@pytest.mark.parametrize(
    "segment",
    [
        ((20.0, -5.25), (20.0, -1.9)),  # across the opposite lane only
        ((-8.0, -1.75), (-8.0, 1.75)),  # behind the ego
        ((70.0, -1.75), (70.0, 1.75)),  # beyond the 50 m horizon
        ((10.0, 0.5), (30.0, 0.5)),  # parallel to the route
    ],
)
def test_lines_the_route_does_not_cross_ahead_are_ignored(segment):
    assert hazards.affecting_light(scene(lights=lines([segment], [LightState.RED])), START) is None


def test_light_just_passed_by_the_bumper_has_negative_distance():
    snap = scene(lights=lines([((1.0, -1.75), (1.0, 1.75))], [LightState.RED]))
    assert hazards.affecting_light(snap, START).distance_m == pytest.approx(1.0 - EGO_HALF_LENGTH)


def test_stop_sign_hazard():
    snap = scene(signs=lines([((12.0, -1.75), (12.0, 1.75))], [LightState.RED]))
    sign = hazards.affecting_stop_sign(snap, START)
    assert sign is not None and sign.sign_id == "l0" and sign.index == 0
    assert sign.distance_m == pytest.approx(12.0 - EGO_HALF_LENGTH)
    assert hazards.affecting_stop_sign(snap, START, horizon_m=5.0) is None
    assert hazards.affecting_light(snap, START) is None  # signs are not lights


def test_route_arclength_is_cumulative_distance():
    s = hazards.route_arclength_m(STRAIGHT)
    assert s[0] == 0.0 and s[-1] == pytest.approx(120.0) and np.all(np.diff(s) > 0)


def test_a_line_crossed_twice_counts_where_the_ego_meets_it_next():
    # Out east along y = 0 to x = 30, back west along y = 3; one long line at x = 20 spans both legs.
    out = np.stack([np.arange(0.0, 31.0), np.zeros(31)], axis=1)
    back = np.stack([np.arange(30.0, -1.0, -1.0), np.full(31, 3.0)], axis=1)
    loop = route_from(np.concatenate([out, back]))
    lights = lines([((20.0, -1.75), (20.0, 4.75))], [LightState.RED])
    first = hazards.affecting_light(scene(lights=lights, route=loop), 0)
    assert first.distance_m == pytest.approx(20.0 - EGO_HALF_LENGTH)
    # Ego on the way back at x = 28 (waypoint 33), heading west: the line is 8 m ahead again.
    back_scene = scene(lights=lights, route=loop, ego_xy=(28.0, 3.0), ego_yaw_deg=180.0)
    assert hazards.affecting_light(back_scene, 33).distance_m == pytest.approx(8.0 - EGO_HALF_LENGTH, abs=1e-6)


def test_moving_a_stop_line_is_seen_on_the_next_query():
    near = scene(lights=lines([ACROSS_LANE_AT_20], [LightState.RED]))
    far = scene(lights=lines([((30.0, -1.75), (30.0, 1.75))], [LightState.RED]))
    assert hazards.affecting_light(near, START).distance_m == pytest.approx(20.0 - EGO_HALF_LENGTH)
    assert hazards.affecting_light(far, START).distance_m == pytest.approx(30.0 - EGO_HALF_LENGTH)


# --- the compiled queries against plain numpy statements of them, on random scenes ----------------------


def random_route(rng: np.random.Generator) -> Route:
    """A dense route that goes straight, bends or loops back on itself."""
    kind = rng.integers(3)
    count = int(rng.integers(30, 160))
    if kind == 0:  # straight, any heading
        heading = rng.uniform(-math.pi, math.pi)
        xy = np.arange(count)[:, None] * np.array([math.cos(heading), math.sin(heading)])
    elif kind == 1:  # gentle or sharp bends
        turn = np.cumsum(rng.normal(0.0, rng.choice([0.002, 0.05, 0.2]), count))
        xy = np.cumsum(np.stack([np.cos(turn), np.sin(turn)], axis=1), axis=0)
    else:  # out and back, a few metres apart
        half = count // 2
        out = np.stack([np.arange(half, dtype=float), np.zeros(half)], axis=1)
        xy = np.concatenate([out, out[::-1] + [0.0, rng.uniform(2.0, 8.0)]])
    return route_from(xy + rng.uniform(-500.0, 500.0, 2))


def random_actors(rng: np.random.Generator, route: Route, index: int, count: int, prefix: str) -> ActorBoxes:
    near = np.clip(index + rng.integers(-10, 30, count), 0, len(route.xy) - 1)
    return ActorBoxes(
        tuple(f"{prefix}{k}" for k in range(count)),
        route.xy[near] + rng.normal(0.0, rng.choice([0.5, 3.0, 8.0]), (count, 2)),
        route.yaw_deg[near] + rng.choice([0.0, 90.0, 180.0, -90.0], count) + rng.normal(0.0, 15.0, count),
        np.abs(rng.normal([2.3, 1.0], 0.6, (count, 2))) + 0.05,
        rng.normal(0.0, 5.0, (count, 2)),
    )


def random_scenes(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        route = random_route(rng)
        index = int(rng.integers(0, len(route.xy)))
        ego_xy = route.xy[index] + rng.normal(0.0, 1.0, 2)
        snapshot = scene(
            vehicles=random_actors(rng, route, index, int(rng.integers(1, 8)), "v"),
            walkers=random_actors(rng, route, index, int(rng.integers(1, 4)), "w"),
            route=route,
            ego_xy=ego_xy,
            ego_yaw_deg=float(route.yaw_deg[index] + rng.normal(0.0, 10.0)),
        )
        yield snapshot, index + int(rng.integers(-3, 4)), float(rng.choice([0.0, 5.0, 15.0, 40.0]))


def oracle_corridor(snapshot, boxes, route_index, horizon_m, half_width_m) -> list[tuple[int, float, float]]:
    """The corridor query in vectorised numpy: ``(index, gap_m, speed_along)`` nearest first."""
    route, ego = snapshot.route, snapshot.ego
    radii = np.hypot(*boxes.half_extent.T)
    reach = horizon_m + ego.half_extent[0] + half_width_m + radii
    candidates = np.flatnonzero(np.hypot(*(boxes.xy - ego.xy).T) <= reach)
    if not len(candidates):
        return []
    arclength = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(route.xy, axis=0).T))])
    direction = np.stack([np.cos(np.radians(route.yaw_deg)), np.sin(np.radians(route.yaw_deg))], axis=1)
    index = min(max(route_index, 0), len(route.xy) - 1)
    s_front = arclength[index] + (ego.xy - route.xy[index]) @ direction[index] + ego.half_extent[0]
    start = min(max(route_index - 2, 0), len(route.xy) - 1)
    end = min(int(np.searchsorted(arclength, s_front + horizon_m + radii[candidates].max() + 1.0)) + 1, len(route.xy))
    signs = np.array([[1, 1], [1, -1], [-1, -1], [-1, 1], [0, 0]], float)
    found = []
    for k in candidates:
        yaw = np.radians(boxes.yaw_deg[k])
        forward, right = np.array([np.cos(yaw), np.sin(yaw)]), np.array([-np.sin(yaw), np.cos(yaw)])
        points = (
            boxes.xy[k]
            + signs[:, :1] * boxes.half_extent[k, 0] * forward
            + signs[:, 1:] * boxes.half_extent[k, 1] * right
        )
        nearest = start + np.argmin(((points[:, None] - route.xy[None, start:end]) ** 2).sum(-1), axis=1)
        offset = points - route.xy[nearest]
        along = arclength[nearest] + (offset * direction[nearest]).sum(-1)
        lateral = offset[:, 1] * direction[nearest, 0] - offset[:, 0] * direction[nearest, 1]
        gap = along[:4].min() - s_front
        if (
            lateral[:4].min() <= half_width_m
            and lateral[:4].max() >= -half_width_m
            and along[:4].max() >= s_front
            and gap <= horizon_m
        ):
            found.append((int(k), float(gap), float(boxes.velocity_xy[k] @ direction[nearest[4]])))
    return sorted(found, key=lambda hazard: hazard[1])


@pytest.mark.parametrize("seed", range(3))
def test_corridor_matches_a_numpy_oracle(seed):
    found = 0
    for snapshot, index, horizon_m in random_scenes(seed, 200):
        for boxes, half_width_m in ((snapshot.vehicles, 1.0), (snapshot.walkers, 2.5)):
            hazards_found = corridor.actors_in_corridor(snapshot, boxes, index, horizon_m, half_width_m)
            expected = oracle_corridor(snapshot, boxes, index, horizon_m, half_width_m)
            assert [h.index for h in hazards_found] == [k for k, _, _ in expected]
            for hazard, (_, gap_m, speed) in zip(hazards_found, expected):
                assert hazard.actor_id == boxes.ids[hazard.index]
                assert hazard.distance_m == pytest.approx(gap_m, abs=1e-9)
                assert hazard.speed_along_route_mps == pytest.approx(speed, abs=1e-9)
            found += len(hazards_found)
    assert found > 50  # the scenes do put actors in the corridor


def test_nan_and_infinite_boxes_neither_crash_nor_hide_a_real_leader():
    snapshot = scene(
        vehicles=actors([[8.0, 0.0], [math.nan, 0.0]]), walkers=actors([[6.0, 0.5]], half_extent=(math.inf, 0.3))
    )
    assert [h.actor_id for h in corridor.actors_in_corridor(snapshot, snapshot.vehicles, START, 15.0, 1.0)] == ["a0"]
    corridor.actors_in_corridor(snapshot, snapshot.walkers, START, 15.0, 1.0)  # no exception
    assert [
        h.actor_id for h in corridor.actors_in_corridor(snapshot, snapshot.vehicles, START, np.float32(15.0), 1.0)
    ] == ["a0"]


def test_first_crossing_is_the_first_line_at_or_after_the_ego_centre():
    rng = np.random.default_rng(3)
    for snapshot, index, horizon_m in random_scenes(11, 100):
        route = snapshot.route
        segments = np.stack([route.xy[::9] + rng.normal(0, 2, (len(route.xy[::9]), 2)), route.xy[::9]], axis=1)
        signs = lines(segments, [LightState.RED] * len(segments))
        route_geom = geometry.route_geometry(route)
        found = crossings.route_crossings(route, route_geom, signs.segments)
        s_ego = geometry.ego_arclength(snapshot, index, route_geom)
        s_front = s_ego + EGO_HALF_LENGTH
        first = int(np.searchsorted(found.arclength_m, s_ego))
        expected = None
        if first < len(found.arclength_m) and not found.arclength_m[first] > s_front + horizon_m:
            expected = (int(found.line_index[first]), float(found.arclength_m[first]) - s_front)
        assert crossings.first_crossing(snapshot, signs, index, horizon_m) == expected


# --- the default reaches, pinned at their edges (each case half a metre inside or outside) ---


@pytest.mark.parametrize(
    ("lateral_m", "leads"),
    [
        (1.9, True),  # near side 0.9 m off the route: inside the ego-wide 1.0 m corridor
        (2.1, False),  # near side 1.1 m off: outside (a corridor as wide as the ego's length would take it)
        (-1.9, True),  # the corridor is symmetric
        (-2.1, False),
    ],
)
def test_leader_corridor_is_as_wide_as_the_ego(lateral_m, leads):
    found = hazards.leading_vehicle(scene(vehicles=actors([(15.0, lateral_m)])), START)
    assert (found is not None) == leads


@pytest.mark.parametrize(
    ("lateral_m", "in_path"),
    [(2.7, True), (2.8, False), (-2.7, True), (-2.8, False)],  # near side 2.45 m vs 2.55 m off the route
)
def test_walker_corridor_default_half_width_is_2_5_m(lateral_m, in_path):
    walkers = actors([(8.0, lateral_m)], half_extent=(0.25, 0.25))
    assert bool(hazards.walkers_in_path(scene(walkers=walkers), START)) == in_path


@pytest.mark.parametrize("gap_m, found", [(39.5, True), (40.5, False)])
def test_leader_horizon_is_40_m_from_the_bumper(gap_m, found):
    x = EGO_HALF_LENGTH + gap_m + 2.3  # the car's rear bumper gap_m ahead of the ego's front one
    leader = hazards.leading_vehicle(scene(vehicles=actors([(x, 0.0)])), START)
    assert (leader is not None) == found
    if found:
        assert leader.distance_m == pytest.approx(gap_m, abs=1e-6)


@pytest.mark.parametrize("gap_m, found", [(19.5, True), (20.5, False)])
def test_walker_horizon_is_20_m_from_the_bumper(gap_m, found):
    walkers = actors([(EGO_HALF_LENGTH + gap_m + 0.25, 0.0)], half_extent=(0.25, 0.25))
    assert bool(hazards.walkers_in_path(scene(walkers=walkers), START)) == found


@pytest.mark.parametrize("gap_m, found", [(49.5, True), (50.5, False)])
def test_light_horizon_is_50_m_from_the_bumper(gap_m, found):
    x = EGO_HALF_LENGTH + gap_m
    light = hazards.affecting_light(scene(lights=lines([((x, -1.75), (x, 1.75))], [LightState.RED])), START)
    assert (light is not None) == found
    if found:
        assert light.distance_m == pytest.approx(gap_m)


@pytest.mark.parametrize("gap_m, found", [(19.5, True), (20.5, False)])
def test_stop_sign_horizon_is_20_m_from_the_bumper(gap_m, found):
    x = EGO_HALF_LENGTH + gap_m
    sign = hazards.affecting_stop_sign(scene(signs=lines([((x, -1.75), (x, 1.75))], [LightState.RED])), START)
    assert (sign is not None) == found
