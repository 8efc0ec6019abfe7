"""What the ego's context subscriptions ask SUMO for, and how the answer becomes ActorBoxes.

The ego subscribes to the vehicles and walkers within the observation radius; the variables
asked for here are exactly those :meth:`ContextSubscription.boxes` reads, so the two cannot
drift apart.
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np

from found_rl.sim.sumo.traffic import VEHICLE_PREFIX, WALKER_PREFIX, WALKER_SIZE_M
from found_rl.world import ActorBoxes
from found_rl.world.frames import SumoFrame

_NO_ACTORS = ActorBoxes.empty()


class ContextSubscription:
    """The ego's view of nearby actors through two libsumo context subscriptions.

    Args:
        libsumo: the libsumo module (its variable and command constants).
        frame: the network's SUMO → CARLA frame.
        radius_m: actors farther than this from the ego are not reported.
    """

    def __init__(self, libsumo: ModuleType, frame: SumoFrame, radius_m: float) -> None:
        self._libsumo = libsumo
        self._offset_x, self._offset_y = frame.net_offset
        self.radius_m = radius_m
        ts = libsumo
        self._position, self._angle, self._speed = ts.VAR_POSITION, ts.VAR_ANGLE, ts.VAR_SPEED
        self._length, self._width = ts.VAR_LENGTH, ts.VAR_WIDTH
        self._walker_variables = [self._position, self._angle, self._speed]
        self._vehicle_variables = [*self._walker_variables, self._length, self._width]

    def subscribe(self, ego_id: str) -> None:
        ts = self._libsumo
        ts.vehicle.subscribeContext(ego_id, ts.CMD_GET_VEHICLE_VARIABLE, self.radius_m, self._vehicle_variables)
        ts.vehicle.subscribeContext(ego_id, ts.CMD_GET_PERSON_VARIABLE, self.radius_m, self._walker_variables)

    def unsubscribe(self, ego_id: str) -> None:
        """Drop the subscriptions (before the ego leaves: a subscription to a vehicle that is
        gone fails the next step)."""
        ts = self._libsumo
        ts.vehicle.unsubscribeContext(ego_id, ts.CMD_GET_VEHICLE_VARIABLE, self.radius_m)
        ts.vehicle.unsubscribeContext(ego_id, ts.CMD_GET_PERSON_VARIABLE, self.radius_m)

    def boxes(self, seen: dict[str, dict[int, object]]) -> tuple[ActorBoxes, ActorBoxes]:
        """Vehicle and walker boxes (CARLA frame) from one step's subscription rows.

        Plain float arithmetic per actor, then one array build per field: with the few dozen
        actors near the ego a numpy call costs more than the maths it does. The results equal
        the vectorised conversion in frames.py (tests/found_rl/sim/sumo/test_actors.py).
        """
        return self._boxes_of(seen, VEHICLE_PREFIX), self._boxes_of(seen, WALKER_PREFIX)

    def _boxes_of(self, seen: dict[str, dict[int, object]], prefix: str) -> ActorBoxes:
        ids = tuple([k for k in seen if k.startswith(prefix)])
        if not ids:
            return _NO_ACTORS
        position, angle, speed = self._position, self._angle, self._speed
        offset_x, offset_y = self._offset_x, self._offset_y
        is_vehicle = prefix == VEHICLE_PREFIX
        xy, yaw, half, velocity = [], [], [], []
        for row in map(seen.__getitem__, ids):
            yaw_deg = (row[angle] - 90.0 + 180.0) % 360.0 - 180.0  # SUMO angle -> CARLA yaw
            yaw_rad = math.radians(yaw_deg)
            cos, sin = math.cos(yaw_rad), math.sin(yaw_rad)
            x, y = row[position][0] - offset_x, -(row[position][1] - offset_y)
            if is_vehicle:
                half_length, half_width = row[self._length] / 2.0, row[self._width] / 2.0
                # SUMO places vehicles by their front bumpers, walkers by their centres.
                x, y = x - cos * half_length, y - sin * half_length
            else:
                half_length = half_width = WALKER_SIZE_M / 2.0
            xy.append((x, y))
            yaw.append(yaw_deg)
            half.append((half_length, half_width))
            velocity.append((cos * row[speed], sin * row[speed]))
        return ActorBoxes(
            ids=ids,
            xy=np.array(xy, dtype=np.float64),
            yaw_deg=np.array(yaw, dtype=np.float64),
            half_extent=np.array(half, dtype=np.float64),
            velocity_xy=np.array(velocity, dtype=np.float64),
        )
