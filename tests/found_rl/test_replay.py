"""Replay: the compiled per-step pipeline against plain numpy / shapely / OpenCV statements of
every query, on real snapshots of the SUMO env (a few episodes at 50 vehicles and 10 walkers).

Tolerances, stated once: every decision (which actors are hazards, which light or stop sign
is next, which boxes collide, which stop lines the ego's tail crosses, which route segment the
ego is on, every reward term) is identical; distances agree to 1e-9 m; in the BEV's vehicle and
walker channels at most ``MAX_DIFFERING_PIXELS`` of the pixels may differ from drawing each box
on its own, and only on box edges (where a corner rounds to the other side of a 1/16-pixel
step), never inside or far from a box. (On the corpus below none differs at all.)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import pytest
import shapely

from found_rl.bench.sim import follow_route
from found_rl.bev.layers import FIXED_POINT_BITS, FIXED_POINT_SCALE
from found_rl.bev.transform import world_to_pixel_affine
from found_rl.env import ACTOR_HORIZON_M, LIGHT_HORIZON_M, DrivingEnv
from found_rl.hazards import ActorHazard, affecting_light, leading_vehicle, walkers_in_path
from found_rl.infractions import ego_tail_segment, overlapping_boxes
from found_rl.infractions.geometry import RED_LIGHT_LINE_FRACTION, tail_crossing_indices
from found_rl.rewards import get_reward, reward_hazards
from found_rl.routes.progress import BACKWARD_WINDOW, FORWARD_WINDOW, OVERLAP_TOLERANCE_M
from found_rl.scenario import load_scenario

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "small_grid.yaml"
STEPS = 400
REWARD = "valeo"

MAX_DIFFERING_PIXELS = 1e-3
"""Share of the vehicle and walker channels' pixels that may differ from the oracle drawing."""


def numpy_box_corners(xy: np.ndarray, yaw_deg: np.ndarray, half_extent: np.ndarray) -> np.ndarray:
    """``centre + (along + i across) * exp(i yaw)`` for the four corners in drawing order."""
    signs = np.array([1.0, 1.0, -1.0, -1.0]) + 1j * np.array([-1.0, 1.0, 1.0, -1.0])
    local = half_extent[:, :1] * signs.real + 1j * (half_extent[:, 1:] * signs.imag)
    corners = (xy[:, 0] + 1j * xy[:, 1])[:, None] + local * np.exp(1j * np.radians(yaw_deg))[:, None]
    return np.stack([corners.real, corners.imag], axis=-1)


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    """``STEPS`` recorded steps: the snapshot, what the env answered, and the masks it drew."""
    scenario = load_scenario(QUICKSTART)
    traffic = scenario.traffic.model_copy(update={"vehicles": (50, 50), "walkers": (10, 10), "warmup_s": 20.0})
    env = DrivingEnv(scenario.model_copy(update={"traffic": traffic}), observation="bev", reward=REWARD)
    contexts = []
    reward_fn = env._reward_fn
    env._reward_fn = lambda context: contexts.append(context) or reward_fn(context)
    records = []
    try:
        env.reset(seed=3)
        for _ in range(STEPS):
            before = env.progress
            previous_tail = ego_tail_segment(env.snapshot.ego)[0]
            _, _, terminated, truncated, info = env.step(follow_route(env))
            records.append(
                {
                    "snapshot": env.snapshot,
                    "before": before,
                    "progress": env.progress,
                    "previous_tail": previous_tail,
                    "reward_terms": dict(info["reward_terms"]),
                    "context": contexts[-1],
                    "masks": env.renderer.last_masks.copy(),
                    "frames_time_s": [frame.time_s for frame in env.renderer._last_frames],
                }
            )
            if terminated or truncated:
                env.reset()
    finally:
        env.close()
    return records


def oracle_corridor(snapshot, boxes, route_index, horizon_m, half_width_m) -> list[tuple[int, float, float]]:
    """The corridor query in vectorised numpy: ``(index, gap_m, speed along)`` nearest first."""
    route, ego = snapshot.route, snapshot.ego
    if not len(boxes):
        return []
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
    corners = numpy_box_corners(boxes.xy[candidates], boxes.yaw_deg[candidates], boxes.half_extent[candidates])
    found = []
    for k, points in zip(candidates, corners):
        nearest = start + np.argmin(((points[:, None] - route.xy[None, start:end]) ** 2).sum(-1), axis=1)
        offset = points - route.xy[nearest]
        along = arclength[nearest] + (offset * direction[nearest]).sum(-1)
        lateral = offset[:, 1] * direction[nearest, 0] - offset[:, 0] * direction[nearest, 1]
        gap = along.min() - s_front
        if (
            lateral.min() <= half_width_m
            and lateral.max() >= -half_width_m
            and along.max() >= s_front
            and gap <= horizon_m
        ):
            speed = float(boxes.velocity_xy[k] @ direction[nearest_centre(route.xy, start, end, boxes.xy[k])])
            found.append((int(k), float(gap), speed))
    return sorted(found, key=lambda hazard: hazard[1])


def nearest_centre(route_xy: np.ndarray, start: int, end: int, point: np.ndarray) -> int:
    return start + int(np.argmin(((route_xy[start:end] - point) ** 2).sum(-1)))


def oracle_collisions(ego, boxes) -> list[int]:
    """Boxes whose polygon shares area with the ego's (touching is no collision)."""
    ego_box = shapely.Polygon(numpy_box_corners(ego.xy[None], np.array([ego.yaw_deg]), ego.half_extent[None])[0])
    polygons = [shapely.Polygon(c) for c in numpy_box_corners(boxes.xy, boxes.yaw_deg, boxes.half_extent)]
    return [k for k, polygon in enumerate(polygons) if ego_box.intersection(polygon).area > 1e-9]


def oracle_tail_crossings(previous_tail, ego, segments: np.ndarray) -> list[int]:
    """Stop lines (their middle 80 %) crossed by the tail segment or its near end's motion."""
    near, far = (np.array(point) for point in ego_tail_segment(ego))
    middle = segments.mean(axis=1, keepdims=True)
    lines = middle + RED_LIGHT_LINE_FRACTION * (segments - middle)
    a, b = lines[:, 0], lines[:, 1]

    def cross(u, v):
        return u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]

    def crosses(p0, p1):
        side_p0, side_p1 = cross(b - a, p0 - a), cross(b - a, p1 - a)
        side_a, side_b = cross(p1 - p0, a - p0), cross(p1 - p0, b - p0)
        return (side_p0 * side_p1 <= 0) & (side_p0 != side_p1) & (side_a * side_b <= 0)

    return np.flatnonzero(crosses(far, near) | crosses(np.array(previous_tail), near)).tolist()


def test_hazard_decisions_match_the_oracle(corpus):
    leaders = walkers = 0
    for record in corpus:
        snapshot, index = record["snapshot"], record["progress"].index
        leader = leading_vehicle(snapshot, index, ACTOR_HORIZON_M)
        expected = oracle_corridor(snapshot, snapshot.vehicles, index, ACTOR_HORIZON_M, snapshot.ego.half_extent[1])
        assert (leader.index if leader else None) == (expected[0][0] if expected else None)
        if leader:
            assert leader.distance_m == pytest.approx(expected[0][1], abs=1e-9)
            assert leader.speed_along_route_mps == pytest.approx(expected[0][2], abs=1e-9)
            leaders += 1
        found = walkers_in_path(snapshot, index, ACTOR_HORIZON_M)
        expected = oracle_corridor(snapshot, snapshot.walkers, index, ACTOR_HORIZON_M, 2.5)
        assert [w.index for w in found] == [k for k, _, _ in expected]
        walkers += len(found)
    assert leaders > 20  # the corpus does have traffic ahead


def oracle_hazards(snapshot, boxes, index: int, half_width_m: float) -> list[ActorHazard]:
    found = oracle_corridor(snapshot, boxes, index, ACTOR_HORIZON_M, half_width_m)
    return [ActorHazard(k, boxes.ids[k], gap_m, speed) for k, gap_m, speed in found]


def test_every_reward_term_is_reproduced_from_oracle_hazards(corpus):
    rewarded = 0
    for record in corpus:
        context = record["context"]
        snapshot, index = context.snapshot, context.progress.index
        leaders = oracle_hazards(snapshot, snapshot.vehicles, index, float(snapshot.ego.half_extent[1]))
        walkers = oracle_hazards(snapshot, snapshot.walkers, index, 2.5)
        light = affecting_light(snapshot, index, LIGHT_HORIZON_M)
        hazards = reward_hazards(snapshot, light, None, leaders[0] if leaders else None, walkers)
        assert hazards.vehicle_m == pytest.approx(context.hazards.vehicle_m, abs=1e-9)
        assert hazards.walker_m == pytest.approx(context.hazards.walker_m, abs=1e-9)
        assert hazards.leader_gap_m == pytest.approx(context.hazards.leader_gap_m, abs=1e-9)
        assert hazards.leader_closing_mps == pytest.approx(context.hazards.leader_closing_mps, abs=1e-9)
        if context.hazards.stop_sign_m is None:
            terms = get_reward(REWARD)(dataclasses.replace(context, hazards=hazards)).terms
            assert terms == pytest.approx(record["reward_terms"], abs=1e-9)
            rewarded += 1
    assert rewarded > STEPS // 2


def test_collision_and_red_light_geometry_match_the_oracle(corpus):
    tail_crossings = 0
    for record in corpus:
        snapshot = record["snapshot"]
        ego = snapshot.ego
        for boxes in (snapshot.vehicles, snapshot.walkers):
            found = overlapping_boxes(ego.xy, ego.yaw_deg, ego.half_extent, boxes).tolist()
            assert found == oracle_collisions(ego, boxes)
        segments = np.asarray(snapshot.traffic_lights.segments, dtype=np.float64)
        near, far = ego_tail_segment(ego)
        before = record["previous_tail"]
        found = tail_crossing_indices(
            before[0], before[1], *near, *far, segments.reshape(-1, 4).copy(), RED_LIGHT_LINE_FRACTION
        )
        assert found.tolist() == oracle_tail_crossings(before, ego, segments)
        tail_crossings += len(found)
    assert tail_crossings > 0  # the ego does drive through junctions


def oracle_projection(xy: np.ndarray, point: np.ndarray, lo: int, hi: int) -> tuple[int, float]:
    """``(segment, distance_m)`` of ``point`` on segments ``lo:hi`` of the polyline ``xy``:
    the nearest, unless an earlier run of segments within the overlap tolerance of the nearest
    distance exists, whose own nearest segment then wins (as in routes/test_progress.py)."""
    start, delta = xy[lo:hi], np.diff(xy, axis=0)[lo:hi]
    length = np.hypot(delta[:, 0], delta[:, 1])
    direction = delta / np.where(length > 1e-9, length, 1.0)[:, None] * (length > 1e-9)[:, None]
    along = np.clip(np.einsum("ij,ij->i", point - start, direction), 0.0, length)
    distance = np.hypot(*(point - start - along[:, None] * direction).T)
    best = int(distance.argmin())
    near = distance <= distance[best] + OVERLAP_TOLERANCE_M
    first = int(near.argmax())
    run_end = first
    while run_end + 1 < len(near) and near[run_end + 1]:
        run_end += 1
    if first < best and run_end < best:
        best = first + int(distance[first : run_end + 1].argmin())
    return lo + best, float(distance[best])


def test_route_tracking_matches_the_oracle(corpus):
    for record in corpus:
        snapshot, before, progress = record["snapshot"], record["before"], record["progress"]
        if progress.distance_driven_m < before.distance_driven_m:
            continue  # a reset happened between the two
        route = snapshot.route
        lo = max(before.index - BACKWARD_WINDOW, 0)
        hi = min(before.index + FORWARD_WINDOW + 1, len(route.xy) - 1)
        segment, distance_m = oracle_projection(route.xy, snapshot.ego.xy, lo, hi)
        assert progress.index == max(segment, before.index)
        assert progress.deviation_m == pytest.approx(distance_m, abs=1e-9)


def oracle_box_channels(snapshots_by_time: dict, record: dict, config) -> np.ndarray:
    """Vehicle then walker channels, each box filled on its own (no shared polygon call)."""
    ego = record["snapshot"].ego
    affine = world_to_pixel_affine(ego.xy, ego.yaw_deg, config.pixels_per_m, config.ego_pixel) * FIXED_POINT_SCALE
    channels = np.zeros((2 * config.history_frames, config.size_px, config.size_px), np.uint8)
    for slot, time_s in enumerate(record["frames_time_s"]):
        snapshot = snapshots_by_time[round(time_s, 6)]
        for kind, (boxes, scale) in enumerate(
            ((snapshot.vehicles, config.vehicle_box_scale), (snapshot.walkers, config.walker_box_scale))
        ):
            if not len(boxes):
                continue
            half = np.maximum(boxes.half_extent * scale, config.min_half_extent_m)
            corners = numpy_box_corners(boxes.xy, boxes.yaw_deg, half)
            pixels = cv2.transform(corners.reshape(-1, 1, 2), affine).astype(np.int32).reshape(-1, 4, 2)
            for box in pixels:
                cv2.fillPoly(
                    channels[kind * config.history_frames + slot], box[None], 255, cv2.LINE_8, FIXED_POINT_BITS
                )
    return channels


def test_bev_box_channels_differ_from_the_oracle_only_on_a_few_edge_pixels(corpus):
    from found_rl.bev import BevConfig

    config = BevConfig()
    episodes: list[dict] = [{}]
    for record in corpus:  # frames of an episode are looked up by time; a new episode restarts at 0.1 s
        if record["snapshot"].step == 1 and episodes[-1]:
            episodes.append({})
        episodes[-1][round(record["snapshot"].time_s, 6)] = record["snapshot"]
    differing = total = drawn = 0
    episode = 0
    for record in corpus:
        if record["snapshot"].step == 1 and record is not corpus[0]:
            episode += 1
        if any(round(t, 6) not in episodes[episode] for t in record["frames_time_s"]):
            continue  # a frame from the reset snapshot, not recorded
        masks = record["masks"]
        drawn_channels = np.concatenate([masks[list(config.vehicle_channels)], masks[list(config.walker_channels)]])
        expected = oracle_box_channels(episodes[episode], record, config)
        difference = drawn_channels != expected
        differing += int(difference.sum())
        total += difference.size
        drawn += int((expected > 0).sum())
        if difference.any():  # only edge pixels: each has a set and an unset 8-neighbour in the oracle
            grown = np.stack([cv2.dilate(c, np.ones((3, 3), np.uint8)) for c in expected])
            shrunk = np.stack([cv2.erode(c, np.ones((3, 3), np.uint8)) for c in expected])
            assert np.all((grown[difference] > 0) & (shrunk[difference] == 0))
    assert drawn > 10_000  # the corpus does draw boxes
    assert differing <= MAX_DIFFERING_PIXELS * total
