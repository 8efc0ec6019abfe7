"""Traffic lights and stop signs of a CARLA world as stop-line segments with states."""

from __future__ import annotations

import math

import numpy as np

from found_rl.sim.carla.town_geometry import lane_key
from found_rl.world import LightState, StopLines

_STATES = {"Red": LightState.RED, "Yellow": LightState.YELLOW, "Green": LightState.GREEN}


def _state(light) -> LightState:
    """``carla.TrafficLightState.Red`` → RED; Off and Unknown → NONE."""
    return _STATES.get(str(light.state).rsplit(".", 1)[-1], LightState.NONE)


def stop_segment(waypoint) -> np.ndarray:
    """``(2, 2)`` segment across the waypoint's lane, perpendicular to its heading."""
    location, yaw = waypoint.transform.location, math.radians(waypoint.transform.rotation.yaw)
    half = waypoint.lane_width / 2.0
    across = np.array([-math.sin(yaw), math.cos(yaw)]) * half
    centre = np.array([location.x, location.y], dtype=np.float64)
    return np.stack([centre - across, centre + across])


class TrafficLightTable:
    """Stop lines of every traffic light (one per stop waypoint), read each step.

    Segments are built once per world; states come from each light's last tick. The time left
    is known for green and yellow (their durations less the elapsed time); a red light waits
    for the rest of its group, which CARLA does not expose, so red reports ``inf``.
    """

    def __init__(self, lights: list) -> None:
        self._lights, self._light_of_segment, ids, lanes, segments = [], [], [], [], []
        for light in sorted(lights, key=lambda actor: actor.id):
            index = len(self._lights)
            self._lights.append(light)
            for waypoint in light.get_stop_waypoints():
                self._light_of_segment.append(index)
                ids.append(f"light{light.id}")
                lanes.append(lane_key(waypoint))
                segments.append(stop_segment(waypoint))
        self._ids, self._lanes = tuple(ids), tuple(lanes)
        self._segments = np.asarray(segments, dtype=np.float64).reshape(-1, 2, 2)
        self._owner = np.asarray(self._light_of_segment, dtype=np.int64)

    def stop_lines(self) -> StopLines:
        states = np.zeros(len(self._lights), dtype=np.int8)
        remaining = np.full(len(self._lights), np.inf)
        phase = np.full(len(self._lights), np.inf)
        for i, light in enumerate(self._lights):
            state = _state(light)
            states[i] = state
            duration = {
                LightState.GREEN: light.get_green_time, LightState.YELLOW: light.get_yellow_time
            }.get(state)  # fmt: skip
            if duration is not None:
                phase[i] = float(duration())
                remaining[i] = max(phase[i] - float(light.get_elapsed_time()), 0.0)
        owner = self._owner
        return StopLines(
            ids=self._ids,
            lane_ids=self._lanes,
            segments=self._segments,
            states=states[owner] if len(owner) else np.zeros(0, np.int8),
            remaining_s=remaining[owner] if len(owner) else np.zeros(0),
            phase_s=phase[owner] if len(owner) else np.zeros(0),
        )


def stop_sign_lines(signs: list, carla_map, carla) -> StopLines:
    """Stop lines of stop signs: the lane under each sign's trigger volume, across that lane."""
    ids, lanes, segments = [], [], []
    for sign in sorted(signs, key=lambda actor: actor.id):
        transform = sign.get_transform()
        yaw = math.radians(transform.rotation.yaw)
        local = sign.trigger_volume.location
        x = transform.location.x + local.x * math.cos(yaw) - local.y * math.sin(yaw)
        y = transform.location.y + local.x * math.sin(yaw) + local.y * math.cos(yaw)
        waypoint = carla_map.get_waypoint(
            carla.Location(x=x, y=y, z=transform.location.z), project_to_road=True, lane_type=carla.LaneType.Driving
        )
        if waypoint is None:
            continue
        ids.append(f"stop{sign.id}")
        lanes.append(lane_key(waypoint))
        segments.append(stop_segment(waypoint))
    if not ids:
        return StopLines.empty()
    count = len(ids)
    return StopLines(
        ids=tuple(ids),
        lane_ids=tuple(lanes),
        segments=np.asarray(segments, dtype=np.float64),
        states=np.full(count, LightState.RED, dtype=np.int8),
        remaining_s=np.full(count, np.inf),
        phase_s=np.full(count, np.inf),
    )
