"""The expert's pure controller: ExpertObservation -> (acc, steer).

Lateral: the Stanley law (on a point 1 m ahead of the box centre, which the route describes)
with a short heading preview. Longitudinal: a desired speed, tracked by a proportional controller with a
feed-forward term. The desired speed is the minimum of the cruise speed and
of every *speed constraint ahead* ``(distance d, speed u)`` turned into the fastest speed from
which the car can still slow to ``u`` within ``d`` at a comfortable deceleration b,
``sqrt(u² + 2 b d)``. Constraints come from

* curves: ``u = sqrt(a_lat / curvature)`` at each upcoming route point;
* the leader: its speed at the IDM desired gap ``s0 + v T``;
* red or yellow lights (yellow only when stopping comfortably is still possible), stop signs
  not yet served, walkers in the path, the entry of an unsignalised junction with crossing
  traffic, and the end of the route: ``u = 0`` a margin before.

The controller keeps no memory, so the advisor plug-in can run it on independent requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from found_rl.expert.observation import ExpertObservation
from found_rl.sim.vehicle_dynamics import VehicleParams

_VEHICLE = VehicleParams()

_RED, _YELLOW = 1, 2


@dataclass(frozen=True)
class ExpertConfig:
    """Expert parameters (defaults tuned on ``scenarios/town_grid.yaml``).

    Attributes:
        cruise_speed_mps: speed on a free straight road.
        max_lateral_accel_mps2: sets the corner speed ``sqrt(a_lat / curvature)``.
        comfort_decel_mps2: deceleration b used to plan every slow-down.
        wheelbase_m: distance between axles (pure pursuit geometry).
        max_steer_deg: road-wheel angle at ``steer = 1`` (the ego model's constant).
        steer_reference_m: the point the Stanley law tracks, metres ahead of the box centre
            (which the route describes). 1 m, not 0: real junctions join offset lanes with
            straight internal lanes (Braunschweig's research intersection steps 3 m sideways
            within 5 m, with 57° kinks), and a car steered from its centre turns back too late
            at the second kink and puts its front corner 0.4 m off the road.
        steer_preview_s: the route heading is read this many seconds ahead of the front axle.
        cross_track_gain: Stanley gain k on the cross-track error (4, not 2: the spider
            town's sharpest corners leave the box 0.1 m from the kerb).
        cross_track_soft_mps: softening speed of the Stanley term at low speed.
        reaction_time_s: constraints are judged from where the car will be after this delay
            (covers the lag of the speed controller).
        min_gap_m: IDM standstill gap s0 to the leader (bumper to bumper).
        time_headway_s: IDM time gap T to the leader.
        stop_margin_m: where to stop before a stop line (distance from the line).
        walker_margin_m: where to stop before a walker in the path.
        approach_gain_per_s: caps the speed ``d`` metres before a constraint at ``u + gain·d``.
        speed_gain: acc per m/s of speed error.
        cruise_feedforward: throttle that holds the cruise speed against drag.
        stop_speed_mps: below this desired speed the expert holds the brake.
        hold_brake: brake applied while holding.
    """

    cruise_speed_mps: float = 8.0
    max_lateral_accel_mps2: float = 2.0
    comfort_decel_mps2: float = 2.5
    wheelbase_m: float = _VEHICLE.wheelbase_m
    max_steer_deg: float = _VEHICLE.max_steer_deg
    steer_reference_m: float = 1.0
    steer_preview_s: float = 0.2
    cross_track_gain: float = 4.0
    cross_track_soft_mps: float = 1.0
    reaction_time_s: float = 0.5
    min_gap_m: float = 4.0
    time_headway_s: float = 1.2
    stop_margin_m: float = 2.0
    walker_margin_m: float = 5.0
    approach_gain_per_s: float = 1.0
    speed_gain: float = 0.6
    cruise_feedforward: float = 0.14
    stop_speed_mps: float = 0.3
    hold_brake: float = 0.6


def expert_action(observation: ExpertObservation, config: ExpertConfig | None = None) -> tuple[float, float]:
    """The expert's ``(acc, steer)`` for one observation (ARCHITECTURE §3 convention)."""
    config = config or ExpertConfig()
    route = np.asarray(observation.route_ego, dtype=np.float64).reshape(-1, 2)
    steer = stanley_steer(route, observation.speed_mps, config)
    target = desired_speed(observation, route, config)
    return track_speed(observation.speed_mps, target, config), steer


def stanley_steer(route_ego: np.ndarray, speed_mps: float, config: ExpertConfig) -> float:
    """Steer in ``[-1, 1]`` (positive right) from the Stanley law at ``steer_reference_m``.

    The road-wheel angle is the route's heading a short preview ahead of the reference point
    (which makes up for the steering-rate lag) plus ``atan(k e / (v + v_soft))`` for the
    cross-track error e. Pure pursuit cut the 4 m-radius junction corners of the generated
    towns onto the kerb; tracking a point near the box centre keeps the whole car on the road.
    """
    if len(route_ego) < 2:
        return 0.0
    v = max(speed_mps, 0.0)
    reference = np.array([config.steer_reference_m, 0.0])
    start, steps = route_ego[:-1], np.diff(route_ego, axis=0)
    lengths = np.maximum(np.hypot(steps[:, 0], steps[:, 1]), 1e-6)
    along = np.clip(np.einsum("ij,ij->i", reference - start, steps) / lengths**2, 0.0, 1.0)
    nearest = start + along[:, None] * steps
    k = int(np.argmin(np.hypot(*(nearest - reference).T)))
    direction = steps[k] / lengths[k]
    # Signed offset of the route from the axle, positive when the route lies to the right.
    cross_track_m = float((nearest[k] - reference) @ np.array([-direction[1], direction[0]]))
    arc_m = np.concatenate([[0.0], np.cumsum(lengths)])
    preview_m = arc_m[k] + along[k] * lengths[k] + config.steer_preview_s * v
    j = min(int(np.searchsorted(arc_m, preview_m, side="right")) - 1, len(steps) - 1)
    heading = math.atan2(steps[j, 1], steps[j, 0])
    correction = math.atan2(config.cross_track_gain * cross_track_m, v + config.cross_track_soft_mps)
    wheel_angle = heading + correction
    return float(np.clip(wheel_angle / math.radians(config.max_steer_deg), -1.0, 1.0))


def speed_constraints(
    observation: ExpertObservation, route_ego: np.ndarray, config: ExpertConfig
) -> list[tuple[float, float]]:
    """Every ``(distance_m, speed_mps)`` the car must respect ahead (see the module docstring)."""
    v = max(observation.speed_mps, 0.0)
    constraints = [(d, u) for d, u in curve_speeds(route_ego, config)]
    if observation.leader_gap_m is not None:
        leader_speed = max(observation.leader_speed_mps or 0.0, 0.0)
        desired_gap = config.min_gap_m + v * config.time_headway_s
        constraints.append((observation.leader_gap_m - desired_gap, leader_speed))
    if observation.light_distance_m is not None and observation.light_distance_m > -0.5:
        must_stop = observation.light_state == _RED or (
            observation.light_state == _YELLOW and _can_stop(v, observation.light_distance_m, config)
        )
        if must_stop:
            constraints.append((observation.light_distance_m - config.stop_margin_m, 0.0))
    if observation.stop_sign_distance_m is not None:
        constraints.append((observation.stop_sign_distance_m - config.stop_margin_m, 0.0))
    if observation.yield_distance_m is not None:
        constraints.append((observation.yield_distance_m - config.stop_margin_m, 0.0))
    if observation.walker_distance_m is not None:
        constraints.append((observation.walker_distance_m - config.walker_margin_m, 0.0))
    if math.isfinite(observation.remaining_route_m):
        constraints.append((observation.remaining_route_m + 1.0, 0.0))
    return constraints


def desired_speed(observation: ExpertObservation, route_ego: np.ndarray, config: ExpertConfig) -> float:
    """The fastest speed from which every constraint ahead can be met at ``comfort_decel``."""
    speed = config.cruise_speed_mps
    lag_m = config.reaction_time_s * max(observation.speed_mps, 0.0)
    for distance_m, limit_mps in speed_constraints(observation, route_ego, config):
        gap_m = distance_m - lag_m
        if gap_m >= 0.0:
            # The braking curve sqrt(u² + 2 b d), with a linear tail so the car creeps to rest
            # instead of arriving at the point with a speed it then cannot shed.
            reachable = min(
                math.sqrt(limit_mps**2 + 2.0 * config.comfort_decel_mps2 * gap_m),
                limit_mps + config.approach_gain_per_s * gap_m,
            )
        else:
            # Already inside the margin (e.g. closer to the leader than the IDM gap): go
            # slower than the constraint's speed until the margin opens again.
            reachable = max(limit_mps + config.approach_gain_per_s * gap_m, 0.0)
        speed = min(speed, reachable)
    return speed


def curve_speeds(route_ego: np.ndarray, config: ExpertConfig) -> list[tuple[float, float]]:
    """``(distance along the route, corner speed)`` at each upcoming route point."""
    if len(route_ego) < 3:
        return []
    steps = np.diff(route_ego, axis=0)
    lengths = np.hypot(steps[:, 0], steps[:, 1])
    headings = np.unwrap(np.arctan2(steps[:, 1], steps[:, 0]))
    middle_m = np.cumsum(lengths) - 0.5 * lengths  # arc length of each segment's midpoint
    result = []
    for i in range(1, len(headings)):
        # Heading change across two segments (~4 m) smooths the route's discretisation.
        j = max(0, i - 2)
        span_m = max(middle_m[i] - middle_m[j], 1e-3)
        curvature = abs(headings[i] - headings[j]) / span_m
        if curvature > 1e-3:
            result.append((float(middle_m[j]), math.sqrt(config.max_lateral_accel_mps2 / curvature)))
    return result


def track_speed(speed_mps: float, target_mps: float, config: ExpertConfig) -> float:
    """acc in ``[-1, 1]``: hold the brake near standstill, else P control plus feed-forward."""
    if target_mps < config.stop_speed_mps:
        return -config.hold_brake if speed_mps < 1.0 else -1.0
    error = target_mps - speed_mps
    feedforward = config.cruise_feedforward * min(target_mps / config.cruise_speed_mps, 1.0)
    return float(np.clip(feedforward + config.speed_gain * error, -1.0, 1.0))


def _can_stop(speed_mps: float, distance_m: float, config: ExpertConfig) -> bool:
    """Whether the car can stop before the line without braking harder than comfort."""
    return speed_mps**2 / (2.0 * config.comfort_decel_mps2) <= max(distance_m - 0.5, 0.0) + 1.0
