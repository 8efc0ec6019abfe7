"""Roach's "valeo" reward (Zhang et al. 2021, carla-roach ``valeo_action.py``).

r = r_speed + r_position + r_rotation + r_action + r_terminal, with

- r_speed = 1 - |v - v_des| / v_max, v_max = 6 m/s; v_des = min(v_max, v_hazard...) where each
  hazard at centre distance d allows ``v_max * clip(d - d0, 0, 5) / 5`` (d0: vehicle 8 m,
  walker 6 m, red/yellow light 5 m, unserved stop sign 5 m);
- r_position = -lateral distance to the route / 2;
- r_rotation = -|ego yaw - route yaw| in radians (Roach's version that does not divide by pi);
- r_action = -0.1 when the steer changed by more than 0.01;
- r_terminal = -1 when the episode terminates, minus the ego speed as well on collisions and
  red-light (or stop-sign) runs. Completing the route is not penalised: Roach never ends an
  episode on success, found-rl does (ARCHITECTURE §5), and a -1 there would teach the policy
  to avoid arriving.
"""

from __future__ import annotations

from dataclasses import dataclass

from found_rl.events import InfractionKind
from found_rl.infractions import TERMINAL_KINDS
from found_rl.rewards.context import Reward, StepContext

SPEED_DEBUFF_KINDS = frozenset(
    {
        InfractionKind.COLLISION_VEHICLE,
        InfractionKind.COLLISION_PEDESTRIAN,
        InfractionKind.COLLISION_LAYOUT,
        InfractionKind.RED_LIGHT,
        InfractionKind.STOP_SIGN,
    }
)
"""Terminations that additionally cost the ego's speed (Roach: collision, red light, stop sign)."""


@dataclass(frozen=True)
class ValeoConfig:
    """Constants of the valeo reward (Roach's values).

    Attributes:
        max_speed_mps: v_max, the desired speed with no hazard.
        vehicle_offset_m, walker_offset_m, light_offset_m, stop_sign_offset_m: d0 per hazard.
        slow_down_range_m: distance over which the desired speed ramps from 0 to v_max.
        steer_change_threshold: steer change that costs ``steer_change_penalty``.
        steer_change_penalty: the cost.
    """

    max_speed_mps: float = 6.0
    vehicle_offset_m: float = 8.0
    walker_offset_m: float = 6.0
    light_offset_m: float = 5.0
    stop_sign_offset_m: float = 5.0
    slow_down_range_m: float = 5.0
    steer_change_threshold: float = 0.01
    steer_change_penalty: float = 0.1


def hazard_speed_mps(distance_m: float | None, offset_m: float, config: ValeoConfig) -> float:
    """Speed allowed by one hazard: 0 within ``offset_m``, then linear up to v_max."""
    if distance_m is None:
        return config.max_speed_mps
    ramp = min(max(distance_m - offset_m, 0.0), config.slow_down_range_m) / config.slow_down_range_m
    return config.max_speed_mps * ramp


def desired_speed_mps(context: StepContext, config: ValeoConfig) -> float:
    """v_des: the slowest speed any hazard allows."""
    h = context.hazards
    return min(
        config.max_speed_mps,
        hazard_speed_mps(h.vehicle_m, config.vehicle_offset_m, config),
        hazard_speed_mps(h.walker_m, config.walker_offset_m, config),
        hazard_speed_mps(h.light_m, config.light_offset_m, config),
        hazard_speed_mps(h.stop_sign_m, config.stop_sign_offset_m, config),
    )


def valeo_reward(context: StepContext, config: ValeoConfig = ValeoConfig()) -> Reward:
    """The valeo reward of one step (see the module docstring)."""
    ego = context.snapshot.ego
    speed_mps = ego.speed_mps
    desired_mps = desired_speed_mps(context, config)
    r_speed = 1.0 - abs(speed_mps - desired_mps) / config.max_speed_mps
    r_position = -context.progress.lateral_m / 2.0
    r_rotation = -abs(context.progress.heading_error_rad)
    steer_change = abs(ego.steer - context.previous.ego.steer)
    r_action = -config.steer_change_penalty if steer_change > config.steer_change_threshold else 0.0
    r_terminal = 0.0
    if context.terminated and any(i.kind in TERMINAL_KINDS for i in context.report.infractions):
        r_terminal = -1.0
        if any(i.kind in SPEED_DEBUFF_KINDS for i in context.report.infractions):
            r_terminal -= speed_mps
    terms = {
        "speed": r_speed,
        "position": r_position,
        "rotation": r_rotation,
        "action": r_action,
        "terminal": r_terminal,
    }
    return Reward(r_speed + r_position + r_rotation + r_action + r_terminal, terms)
