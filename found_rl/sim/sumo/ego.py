"""The ego in SUMO: a kinematic-bicycle car inserted at its route start and placed by ``moveToXY``.

Each step the ego moves by the bicycle model (``found_rl.sim.vehicle_dynamics``) and is placed
into SUMO with ``moveToXY`` (``keepRoute=3`` on its route's lanes, ``2`` off them), so SUMO's
drivers see it and react (ARCHITECTURE §2, §3). Our model keeps the truth; SUMO's copy is
where its drivers see the ego.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from found_rl.actions import Controls
from found_rl.routes import RoutePlanner
from found_rl.sim import vehicle_dynamics
from found_rl.sim.sumo.actors import ContextSubscription
from found_rl.sim.sumo.spawn_safety import EgoEnvelope
from found_rl.sim.sumo.traffic import EGO_ID, EGO_TYPE
from found_rl.sim.vehicle_dynamics import VehicleParams, VehicleState
from found_rl.world import STEP_S, EgoState, Route

SPAWN_MARGIN_M = 0.5  # between the ego's rear and the start of its first lane
MOVE_MATCH_M = 5.0  # how far from a lane SUMO still maps the ego onto it


class Ego:
    """The ego's true state and its copy in SUMO, with the subscriptions to what it sees.

    Args:
        libsumo: the libsumo module.
        planner: the network's route planner (its frame and lane shapes).
        vehicle: the ego's size and dynamics.
        context: the subscriptions to the actors near the ego.

    Attributes:
        state: pose and motion (CARLA frame) by the bicycle model.
        controls: the controls of the last step.
    """

    def __init__(
        self, libsumo, planner: RoutePlanner, vehicle: VehicleParams, context: ContextSubscription
    ) -> None:
        self._libsumo = libsumo
        self._planner = planner
        self._frame = planner.frame
        self._vehicle = vehicle
        self._context = context
        self._route_id = ""
        self._half_extent = np.array([vehicle.length_m / 2.0, vehicle.width_m / 2.0])
        self.state = VehicleState(0.0, 0.0, 0.0)
        self.controls = Controls(0.0, 0.0, 0.0)

    def spawn_index(self, route: Route) -> int:
        """First route waypoint with the whole ego box on its lane.

        A route may start at the very beginning of a lane; on an edge that starts at the map
        border the rear of a car centred there would hang off the road.
        """
        lane = route.lane_ids[0]
        lane_pos_m = self._planner.project_onto(
            self._planner.shape(lane), self._frame.to_sumo_xy(route.xy[0])
        )
        missing_m = self._vehicle.length_m / 2.0 + SPAWN_MARGIN_M - lane_pos_m
        if missing_m <= 0.0 or len(route.xy) < 2:
            return 0
        along_m = np.cumsum(np.linalg.norm(np.diff(route.xy, axis=0), axis=1))
        return min(int(np.searchsorted(along_m, missing_m)) + 1, len(route.xy) - 1)

    def stand_at(self, route: Route, index: int) -> None:
        """Put the ego, standing and with no controls, at waypoint ``index`` (not yet into SUMO)."""
        self.state = VehicleState(
            float(route.xy[index, 0]), float(route.xy[index, 1]), float(route.yaw_deg[index])
        )
        self.controls = Controls(0.0, 0.0, 0.0)

    def envelope(self) -> EgoEnvelope:
        """The ego's current pose and speed in SUMO's frame, for judging spawn points."""
        ego = self.state
        yaw = math.radians(ego.yaw_deg)
        xy = self._frame.to_sumo_xy(np.array([ego.x_m, ego.y_m]))
        ahead = self._frame.to_sumo_xy(np.array([ego.x_m + math.cos(yaw), ego.y_m + math.sin(yaw)]))
        half_length_m = self._vehicle.length_m / 2.0
        return EgoEnvelope(xy, ahead - xy, ego.speed_mps, half_length_m, self._vehicle.max_brake_mps2)

    def insert(self, route: Route, start: int, route_id: str) -> None:
        """Add the ego to SUMO at waypoint ``start`` of ``route`` (where it stands), on a SUMO
        route ``route_id`` over the route's edges, and subscribe to what it sees."""
        ts = self._libsumo
        start_lane = route.lane_ids[start]
        self._route_id = route_id
        edges = [
            lane.rsplit("_", 1)[0]
            for lane in dict.fromkeys(route.lane_ids[start:])
            if not lane.startswith(":")
        ]
        edges = list(dict.fromkeys(edges)) or [start_lane.rsplit("_", 1)[0]]
        ts.route.add(route_id, edges)
        shape = self._planner.shape(start_lane)
        front = self._planner.project_onto(
            shape, self._frame.to_sumo_xy(route.xy[min(start + 3, len(route.xy) - 1)])
        )
        lane_length = self._planner.lane_length(start_lane)
        depart_pos = float(
            np.clip(front, min(self._vehicle.length_m, lane_length), lane_length)
        )
        lane_index = (
            start_lane.rsplit("_", 1)[1] if not start_lane.startswith(":") else "best"
        )
        self._add_vehicle(depart_lane=lane_index, depart_pos=f"{depart_pos:.2f}")

    def reinsert(self) -> None:
        """Add the ego again after SUMO dropped it (it reached the end of its SUMO route)."""
        self._add_vehicle()

    def detach(self) -> None:
        """Drop the subscriptions to the ego before it is removed: a subscription to a vehicle
        that is gone fails the next step."""
        ts = self._libsumo
        if EGO_ID in (*ts.vehicle.getIDList(), *ts.simulation.getPendingVehicles()):
            ts.vehicle.unsubscribe(EGO_ID)
            self._context.unsubscribe(EGO_ID)

    def drive(self, controls: Controls) -> None:
        """Apply ``controls`` for one step of the bicycle model and place the ego in SUMO."""
        self.controls = controls
        self.state = vehicle_dynamics.step_vehicle(self.state, controls, STEP_S, self._vehicle)
        self._place()

    def ego_state(self, lane_id: str | None) -> EgoState:
        """The snapshot's view of the ego, on SUMO lane ``lane_id``."""
        ego = self.state
        yaw = math.radians(ego.yaw_deg)
        return EgoState(
            xy=np.array([ego.x_m, ego.y_m]),
            yaw_deg=ego.yaw_deg,
            velocity_xy=np.array([ego.speed_mps * math.cos(yaw), ego.speed_mps * math.sin(yaw)]),
            half_extent=self._half_extent.copy(),
            throttle=self.controls.throttle,
            steer=self.controls.steer,
            brake=self.controls.brake,
            gear=1 if ego.speed_mps > 0.0 else 0,
            lane_id=lane_id,
            acceleration_mps2=ego.accel_mps2,
        )

    def _add_vehicle(self, depart_lane: str = "best", depart_pos: str = "base") -> None:
        """Insert the ego into SUMO and subscribe to what it sees."""
        ts = self._libsumo
        ts.vehicle.add(
            EGO_ID,
            self._route_id,
            typeID=EGO_TYPE,
            departLane=depart_lane,
            departPos=depart_pos,
            departSpeed="0",
        )
        ts.vehicle.subscribe(EGO_ID, [ts.VAR_LANE_ID])
        self._context.subscribe(EGO_ID)
        self._place()

    def _place(self) -> None:
        x, y, angle = self._frame.centre_to_front_sumo_scalar(
            self.state.x_m, self.state.y_m, self.state.yaw_deg, self._vehicle.length_m / 2.0
        )
        move, error = self._libsumo.vehicle.moveToXY, self._libsumo.TraCIException
        try:
            # On its route, the ego is matched to the route's own lanes: inside a junction the
            # nearest lane is often another connection's, and SUMO's drivers would then judge
            # conflicts (who yields to whom) against a path the ego is not taking.
            move(EGO_ID, "", -1, x, y, angle, keepRoute=3, matchThreshold=MOVE_MATCH_M)
        except error:
            # Off every lane, this fails too: SUMO keeps its last pose, our model keeps the truth.
            with contextlib.suppress(error):
                move(EGO_ID, "", -1, x, y, angle, keepRoute=2, matchThreshold=MOVE_MATCH_M)
