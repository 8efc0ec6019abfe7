"""A CaRL-style reward (Jaeger et al. 2025, "CaRL: Learning Scalable Planning Policies with
Simple Rewards"): route progress, scaled down by soft penalties; serious infractions end the
episode instead of costing reward.

r = Δcompletion × f_speed × f_centre × f_ttc × f_comfort × f_lanes + r_terminal

- Δcompletion: fraction of the route gained this step (the episode's sum is RC, in [0, 1]);
- f_speed = max(0, 1 - overspeed / max_overspeed) above the speed limit;
- f_centre = 1 - clip(lateral / (lane half-width), 0, 1) × centre_softener (lateral to the
  route, half-width of the route's lane; not applied inside junctions, as CaRL);
- f_ttc = ttc_factor while the time to collision with the leader is below ``min_ttc_s``;
- f_comfort = comfort_factor when longitudinal acceleration, yaw rate or lateral acceleration
  leave nuPlan's comfort bounds;
- f_lanes = 0 while outside the route's lanes;
- r_terminal = ``terminal_reward`` (0 by default: ending the episode forfeits all further
  progress, which is the penalty) on a terminal infraction; none for completing the route.

CaRL's TTC forward-simulates every actor; here it is the leader's gap over the closing speed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from found_rl.infractions import TERMINAL_KINDS
from found_rl.rewards.context import Reward, StepContext
from found_rl.routes.progress import wrap_angle_rad


@dataclass(frozen=True)
class CarlConfig:
    """Constants of the CaRL-style reward.

    Attributes:
        speed_limit_mps: speed above which the speed factor drops.
        max_overspeed_mps: overspeed at which the speed factor reaches 0 (CaRL: 5 mph).
        lane_half_width_m: lateral distance at which the centre factor bottoms out when the
            route's lane is not in the map (otherwise half the lane's width).
        centre_softener: how far the centre factor drops (1: to 0).
        min_ttc_s: time to collision below which ``ttc_factor`` applies.
        ttc_factor: progress factor while the TTC is too short.
        max_accel_mps2, min_accel_mps2, max_yaw_rate_rps, max_lateral_accel_mps2: nuPlan's
            comfort bounds.
        comfort_factor: progress factor while uncomfortable.
        terminal_reward: added when a terminal infraction ends the episode.
    """

    speed_limit_mps: float = 8.33
    max_overspeed_mps: float = 2.23
    lane_half_width_m: float = 1.75
    centre_softener: float = 1.0
    min_ttc_s: float = 2.0
    ttc_factor: float = 0.5
    max_accel_mps2: float = 2.40
    min_accel_mps2: float = -4.05
    max_yaw_rate_rps: float = 0.95
    max_lateral_accel_mps2: float = 4.89
    comfort_factor: float = 0.5
    terminal_reward: float = 0.0


def speed_factor(speed_mps: float, config: CarlConfig) -> float:
    overspeed = speed_mps - config.speed_limit_mps
    return 1.0 if overspeed <= 0 else max(0.0, 1.0 - overspeed / config.max_overspeed_mps)


def centre_factor(lateral_m: float, lane_half_width_m: float, in_junction: bool, config: CarlConfig) -> float:
    if in_junction:
        return 1.0
    violation = min(max(lateral_m / lane_half_width_m, 0.0), 1.0)
    return 1.0 - violation * config.centre_softener


def ttc_factor(gap_m: float | None, closing_mps: float | None, config: CarlConfig) -> float:
    if gap_m is None or closing_mps is None or closing_mps <= 0.0:
        return 1.0
    return config.ttc_factor if gap_m / closing_mps < config.min_ttc_s else 1.0


def comfort_factor(context: StepContext, config: CarlConfig) -> float:
    ego, before = context.snapshot.ego, context.previous.ego
    dt_s = context.snapshot.time_s - context.previous.time_s
    if dt_s <= 0.0:
        return 1.0
    accel = (ego.forward_speed_mps - before.forward_speed_mps) / dt_s
    yaw_rate = wrap_angle_rad(math.radians(ego.yaw_deg - before.yaw_deg)) / dt_s
    lateral_accel = ego.speed_mps * yaw_rate
    comfortable = (
        config.min_accel_mps2 <= accel <= config.max_accel_mps2
        and abs(yaw_rate) <= config.max_yaw_rate_rps
        and abs(lateral_accel) <= config.max_lateral_accel_mps2
    )
    return 1.0 if comfortable else config.comfort_factor


def carl_reward(context: StepContext, config: CarlConfig = CarlConfig()) -> Reward:
    """The CaRL-style reward of one step (see the module docstring)."""
    snapshot, progress = context.snapshot, context.progress
    route = snapshot.route
    lane = snapshot.map.lanes.get(route.lane_ids[min(progress.index, len(route.lane_ids) - 1)])
    factors = {
        "speed": speed_factor(snapshot.ego.speed_mps, config),
        "centre": centre_factor(
            progress.lateral_m,
            lane.width_m / 2.0 if lane is not None else config.lane_half_width_m,
            lane is not None and lane.is_junction,
            config,
        ),
        "ttc": ttc_factor(context.hazards.leader_gap_m, context.hazards.leader_closing_mps, config),
        "comfort": comfort_factor(context, config),
        "lanes": 0.0 if context.report.is_outside_route_lanes else 1.0,
    }
    total = progress.completion_delta
    for value in factors.values():
        total *= value
    terminal = 0.0
    if context.terminated and any(i.kind in TERMINAL_KINDS for i in context.report.infractions):
        terminal = config.terminal_reward
    terms = {"progress": progress.completion_delta, **factors, "terminal": terminal}
    return Reward(total + terminal, terms)
