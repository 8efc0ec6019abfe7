"""The privileged features the expert drives from, as plain JSON-serialisable data.

An :class:`ExpertObservation` is computed next to the simulator (``ExpertObserver``) and can
travel inside an advisor request's ``state`` dict, so that the advisor plug-in
(:class:`found_rl.advisors.ExpertAdvisor`) runs the same pure controller far from the world.

Ego frame: x forward, y to the right (CARLA's left-handed convention seen from above),
metres, origin at the centre of the ego's bounding box.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from found_rl.errors import UserError

TARGET_DISTANCE_M = 8.0
"""How far ahead the prompt's next-target vector lies along the route."""


@dataclass(frozen=True)
class ExpertObservation:
    """What the expert knows at one step.

    Attributes:
        speed_mps: ego forward speed (negative when rolling backwards).
        command: :class:`~found_rl.actions.RoadOption` value of the route at the ego.
        route_ego: upcoming route points in the ego frame, ``((x_fwd, y_right), ...)``,
            about 2 m apart starting at the ego's projection on the route; metres.
        leader_gap_m: bumper-to-bumper gap to the vehicle ahead on the route, if any.
        leader_speed_mps: that vehicle's speed along the route.
        light_state: :class:`~found_rl.world.LightState` value of the light affecting
            the route ahead (0 when none).
        light_distance_m: distance along the route from the ego to that light's stop line.
        light_remaining_ratio: remaining fraction of the light's current phase, or -1.
        stop_sign_distance_m: distance along the route to a stop sign the ego has not yet
            stopped at, if any.
        walker_distance_m: distance along the route to the nearest walker in the ego's path.
        yield_distance_m: distance to the entry of an unsignalised junction the ego must give
            way at (crossing traffic), if any.
        remaining_route_m: route length still ahead of the ego.
    """

    speed_mps: float
    command: int
    route_ego: tuple[tuple[float, float], ...]
    leader_gap_m: float | None = None
    leader_speed_mps: float | None = None
    light_state: int = 0
    light_distance_m: float | None = None
    light_remaining_ratio: float = -1.0
    stop_sign_distance_m: float | None = None
    walker_distance_m: float | None = None
    yield_distance_m: float | None = None
    remaining_route_m: float = math.inf

    @property
    def target_ego_xy(self) -> tuple[float, float]:
        """The next route target, ``TARGET_DISTANCE_M`` ahead along ``route_ego`` (ego frame)."""
        if not self.route_ego:
            return (0.0, 0.0)
        travelled = 0.0
        for previous, point in zip(self.route_ego, self.route_ego[1:], strict=False):
            travelled += math.dist(previous, point)
            if travelled >= TARGET_DISTANCE_M:
                return point
        return self.route_ego[-1]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``inf`` becomes ``None``, tuples become lists).

        It also carries ``target_ego_xy``, the key the VLM prompt reads
        (``vlm_server.answers.build_prompt``), so one ``state`` serves every advisor.
        """
        # field by field: dataclasses.asdict deep-copies every route point, a third of an env step
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["route_ego"] = [list(point) for point in self.route_ego]
        if math.isinf(self.remaining_route_m):
            data["remaining_route_m"] = None
        data["target_ego_xy"] = list(self.target_ego_xy)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExpertObservation:
        """Rebuild from :meth:`to_dict` output, checking every field.

        Raises:
            ValueError: naming the field that is missing, unknown or of the wrong type.
        """
        if not isinstance(data, Mapping):
            raise UserError(f"expert state: expected an object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)} | {"target_ego_xy"}  # derived; recomputed
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"expert state: unknown fields {unknown}; allowed: {sorted(known)}")
        for name in ("speed_mps", "command", "route_ego"):
            if name not in data:
                raise UserError(f"expert state: missing required field '{name}'")
        route = data["route_ego"]
        if not isinstance(route, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in route
        ):
            raise UserError(f"expert state: route_ego must be a list of [x, y] pairs, got {route!r:.80}")
        kwargs: dict[str, Any] = {
            "speed_mps": _number(data, "speed_mps"),
            "command": int(_number(data, "command")),
            "route_ego": tuple((_finite(x, "route_ego"), _finite(y, "route_ego")) for x, y in route),
            "light_state": int(_number(data, "light_state", 0)),
            "light_remaining_ratio": _number(data, "light_remaining_ratio", -1.0),
        }
        for name in (
            "leader_gap_m",
            "leader_speed_mps",
            "light_distance_m",
            "stop_sign_distance_m",
            "walker_distance_m",
            "yield_distance_m",
        ):
            kwargs[name] = None if data.get(name) is None else _number(data, name)
        remaining = data.get("remaining_route_m")
        kwargs["remaining_route_m"] = math.inf if remaining is None else _number(data, "remaining_route_m")
        return cls(**kwargs)


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"expert state: {name} must be a finite number, got {value!r}")
    return float(value)


def _number(data: Mapping[str, Any], name: str, default: float | None = None) -> float:
    if name not in data or data[name] is None:
        if default is None:
            raise UserError(f"expert state: missing required field '{name}'")
        return default
    return _finite(data[name], name)
