"""Background vehicles and walkers: SUMO vehicle types, random trips and their re-spawning.

Trips are drawn once from a seeded generator when the simulation starts (a pool of edge
routes and walking plans) and reused, so spawning during an episode costs one libsumo call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from found_rl.errors import UserError
from found_rl.sim.sumo.spawn_safety import EgoEnvelope

EGO_ID = "ego"
EGO_TYPE = "found_rl_ego"
VEHICLE_PREFIX = "veh"
WALKER_PREFIX = "walker"

# (type id, length m, width m, share) — sedans, compacts and vans.
BACKGROUND_TYPES = (
    ("bg_sedan", 4.6, 1.9, 0.6),
    ("bg_compact", 3.9, 1.7, 0.25),
    ("bg_van", 5.3, 2.1, 0.15),
)
WALKER_SIZE_M = 0.5
# Sidewalk a walker needs to itself: one walker per this many metres of sidewalk.
WALKER_SPACING_M = 5.0
SPEED_FACTOR_RANGE = (0.85, 1.15)  # drivers' seeded speed factors (fraction of the limit)
LANE_WIDTH_M = 3.5
SAFE_DRAWS = 8  # spawn points tried before a vehicle or walker waits for a later step


def vehicle_id(index: int) -> str:
    return f"{VEHICLE_PREFIX}{index}"


def walker_id(index: int) -> str:
    return f"{WALKER_PREFIX}{index}"


def define_types(libsumo, ego_length_m: float, ego_width_m: float) -> None:
    """Create the background and ego vehicle types and size the default pedestrian."""
    for type_id, length, width, _ in BACKGROUND_TYPES:
        libsumo.vehicletype.copy("DEFAULT_VEHTYPE", type_id)
        libsumo.vehicletype.setLength(type_id, length)
        libsumo.vehicletype.setWidth(type_id, width)
        # SUMO's own random draws (driver imperfection, speed factors) are not all restored
        # by loadState; drivers vary through seeded speed factors set by the backend instead.
        libsumo.vehicletype.setImperfection(type_id, 0.0)
        libsumo.vehicletype.setSpeedDeviation(type_id, 0.0)
    libsumo.vehicletype.copy("DEFAULT_VEHTYPE", EGO_TYPE)
    libsumo.vehicletype.setLength(EGO_TYPE, ego_length_m)
    libsumo.vehicletype.setWidth(EGO_TYPE, ego_width_m)
    libsumo.vehicletype.setLength("DEFAULT_PEDTYPE", WALKER_SIZE_M)
    libsumo.vehicletype.setWidth("DEFAULT_PEDTYPE", WALKER_SIZE_M)
    libsumo.vehicletype.setSpeedDeviation("DEFAULT_PEDTYPE", 0.0)
    libsumo.vehicletype.setImperfection("DEFAULT_PEDTYPE", 0.0)


def walk_edge_ids(net) -> list[str]:
    """Ordinary edges with a sidewalk (a lane for pedestrians only), sorted."""
    return sorted(
        e.getID()
        for e in net.getEdges()
        if e.getFunction() == ""
        and any(lane.allows("pedestrian") and not lane.allows("passenger") for lane in e.getLanes())
    )


def walker_capacity(net) -> int:
    """How many walkers the map can host: 0 without sidewalks (walkers need two to walk between).

    Walkers walk on sidewalks only; a map imported without sidewalk lanes (or generated with
    ``sidewalks: false``) hosts none, however many a scenario asks for.
    """
    edges = walk_edge_ids(net)
    if len(edges) < 2:
        return 0
    sidewalk_m = sum(
        lane.getLength()
        for edge_id in edges
        for lane in net.getEdge(edge_id).getLanes()
        if lane.allows("pedestrian") and not lane.allows("passenger")
    )
    return int(sidewalk_m // WALKER_SPACING_M)


@dataclass
class TripPool:
    """Random vehicle routes (SUMO route ids) and walking plans, drawn once per simulation.

    The pool is small on purpose: every route in SUMO's dictionary is written to and parsed
    from each saved state, so it adds to the cost of a reset.
    """

    vehicle_routes: list[str]
    vehicle_route_edges: list[tuple[str, ...]]
    first_edge_length_m: list[float]
    first_edge_speed_mps: list[float]
    first_edge_lanes: list[int]
    walker_plans: list[tuple[str, float, list]]
    walker_starts_xy: np.ndarray  # (len(walker_plans), 2) SUMO-frame start of each plan

    @staticmethod
    def draw(
        libsumo,
        net,
        rng: np.random.Generator,
        num_vehicle_routes: int = 40,
        num_walker_plans: int = 60,
    ) -> TripPool:
        drive_edges = sorted(
            e.getID()
            for e in net.getEdges()
            if e.getFunction() == ""
            and any(lane.allows("passenger") for lane in e.getLanes())
        )
        walk_edges = walk_edge_ids(net)
        routes, route_edges, first_lengths, first_speeds, first_lanes = [], [], [], [], []
        for _ in range(num_vehicle_routes * 3):
            if len(routes) >= num_vehicle_routes or len(drive_edges) < 2:
                break
            start, end = rng.choice(len(drive_edges), size=2, replace=False)
            found = libsumo.simulation.findRoute(
                drive_edges[start], drive_edges[end], vType="bg_sedan"
            )
            if len(found.edges) >= 2:
                route_id = f"bg_route{len(routes)}"
                libsumo.route.add(route_id, list(found.edges))
                routes.append(route_id)
                route_edges.append(tuple(found.edges))
                first = net.getEdge(found.edges[0])
                first_lengths.append(first.getLength())
                first_speeds.append(first.getSpeed())
                first_lanes.append(first.getLaneNumber())
        plans = []
        for _ in range(num_walker_plans * 3):
            if len(plans) >= num_walker_plans or len(walk_edges) < 2:
                break
            start, end = rng.choice(len(walk_edges), size=2, replace=False)
            stages = libsumo.simulation.findIntermodalRoute(
                walk_edges[start], walk_edges[end], modes=""
            )
            if stages:
                length = net.getEdge(walk_edges[start]).getLength()
                plans.append(
                    (walk_edges[start], float(rng.uniform(0.0, length)), list(stages))
                )
        if not routes:
            raise UserError(
                "the network has no drivable route between two edges for background traffic"
            )
        starts = np.array(
            [libsumo.simulation.convert2D(edge, position) for edge, position, _ in plans],
            dtype=np.float64,
        ).reshape(-1, 2)
        return TripPool(routes, route_edges, first_lengths, first_speeds, first_lanes, plans, starts)

    def restore_routes(self, libsumo) -> None:
        """Re-add pooled routes a freshly loaded simulation does not know."""
        known = set(libsumo.route.getIDList())
        for route_id, edges in zip(
            self.vehicle_routes, self.vehicle_route_edges, strict=True
        ):
            if route_id not in known:
                libsumo.route.add(route_id, list(edges))

    def add_vehicle(
        self, libsumo, vehicle: str, rng: np.random.Generator, ego: EgoEnvelope | None = None
    ) -> VehicleDeparture | None:
        """Insert a vehicle on a pooled route, at a seeded position along its first edge.

        With ``ego``, only a departure point the ego's envelope allows is used
        (:mod:`~found_rl.sim.sumo.spawn_safety`); after :data:`SAFE_DRAWS` refused draws
        nothing is inserted and None is returned (try again in a later step).
        """
        shares = np.array([t[3] for t in BACKGROUND_TYPES])
        type_index = int(rng.choice(len(shares), p=shares / shares.sum()))
        type_id, length_m = BACKGROUND_TYPES[type_index][:2]
        for _ in range(SAFE_DRAWS if ego is not None else 1):
            index = int(rng.integers(len(self.vehicle_routes)))
            depart_pos = float(rng.uniform(0.0, self.first_edge_length_m[index]))
            edge = self.vehicle_route_edges[index][0]
            # SUMO's departPos is the front bumper; the whole car and any of the edge's lanes
            # ("best" picks one) are within this reach of the lane-0 point.
            reach_m = length_m + LANE_WIDTH_M * (self.first_edge_lanes[index] - 1)
            speed_mps = self.first_edge_speed_mps[index] * SPEED_FACTOR_RANGE[1]
            xy = np.asarray(libsumo.simulation.convert2D(edge, depart_pos, 0), dtype=np.float64)
            if ego is None or ego.allows_vehicle(xy, speed_mps, reach_m):
                break
        else:
            return None
        libsumo.vehicle.add(
            vehicle,
            self.vehicle_routes[index],
            typeID=type_id,
            departLane="best",
            departPos=f"{depart_pos:.2f}",
            departSpeed="avg",
        )
        libsumo.vehicle.setSpeedFactor(vehicle, float(rng.uniform(*SPEED_FACTOR_RANGE)))
        return VehicleDeparture(xy, speed_mps, reach_m)

    def walker_plans_between(self, xy: np.ndarray, min_m: float, max_m: float) -> np.ndarray:
        """Indices of the walking plans that start ``min_m`` to ``max_m`` from ``xy`` (SUMO frame)."""
        distance_m = np.hypot(*(self.walker_starts_xy - xy).T)
        return np.flatnonzero((distance_m >= min_m) & (distance_m <= max_m))

    def add_walker(
        self,
        libsumo,
        walker: str,
        rng: np.random.Generator,
        plan: int | None = None,
        ego: EgoEnvelope | None = None,
    ) -> bool:
        """Start ``walker`` on pooled plan ``plan`` (default: a seeded random one the ego allows).

        Returns False when there are no plans, or no drawn plan starts where ``ego`` allows.
        """
        if not self.walker_plans:
            return False
        if plan is None:
            for _ in range(SAFE_DRAWS if ego is not None else 1):
                plan = int(rng.integers(len(self.walker_plans)))
                if ego is None or ego.allows_walker(self.walker_starts_xy[plan]):
                    break
            else:
                return False
        edge, position, stages = self.walker_plans[plan]
        libsumo.person.add(walker, edge, position)
        for stage in stages:
            libsumo.person.appendStage(walker, stage)
        return True


@dataclass(frozen=True)
class VehicleDeparture:
    """Where a vehicle was asked to depart (SUMO frame), to re-check it while SUMO holds it back."""

    xy: np.ndarray
    speed_mps: float
    reach_m: float
