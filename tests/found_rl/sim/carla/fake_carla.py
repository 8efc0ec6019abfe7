"""A scripted stand-in for exactly the ``carla`` client API surface the CARLA backend uses.

Road geometry is replayed from a recording of libcarla's own OpenDRIVE parser
(``record_town.py``); the server side is scripted: a ``FakeServer`` registered on a port
holds the world, actors, settings and traffic lights, advances them on ``tick`` (a kinematic
ego, autopilot cars following their lanes, walkers walking to their targets, fixed-time
lights), fires collision-sensor events when boxes overlap, and can be told to hang or die.

Use it as a module: ``fake = load_fake_carla()`` returns a fresh module-like namespace.
"""

from __future__ import annotations

import hashlib
import json
import math
import types
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data"
CLIENT_VERSION = "0.9.16"


# ----------------------------------------------------------------------------- value types
@dataclass
class Vector3D:
    x: float = 0.0
    y: float = 0.0
    z: float = 0.0


class Location(Vector3D):
    def distance(self, location: Location) -> float:
        return math.dist((self.x, self.y, self.z), (location.x, location.y, location.z))


@dataclass
class Rotation:
    pitch: float = 0.0
    yaw: float = 0.0
    roll: float = 0.0


@dataclass
class Transform:
    location: Location = field(default_factory=Location)
    rotation: Rotation = field(default_factory=Rotation)


@dataclass
class BoundingBox:
    location: Vector3D
    extent: Vector3D


class _Named(str):
    """Enum values print as ``Type.Name`` like Boost.Python enums do."""

    def __new__(cls, owner: str, name: str):
        value = super().__new__(cls, f"{owner}.{name}")
        return value


class LaneType:
    Driving = _Named("LaneType", "Driving")
    Sidewalk = _Named("LaneType", "Sidewalk")
    Any = _Named("LaneType", "Any")


class TrafficLightState:
    Red = _Named("TrafficLightState", "Red")
    Yellow = _Named("TrafficLightState", "Yellow")
    Green = _Named("TrafficLightState", "Green")
    Off = _Named("TrafficLightState", "Off")


@dataclass
class LaneMarking:
    type: str


@dataclass
class VehicleControl:
    throttle: float = 0.0
    steer: float = 0.0
    brake: float = 0.0
    hand_brake: bool = False
    reverse: bool = False
    gear: int = 0


@dataclass
class WorldSettings:
    synchronous_mode: bool = False
    fixed_delta_seconds: float | None = None
    no_rendering_mode: bool = False
    deterministic_ragdolls: bool = False

    def copy(self) -> WorldSettings:
        return WorldSettings(**vars(self))


class OpendriveGenerationParameters:
    def __init__(self, **kwargs) -> None:
        self.__dict__.update(kwargs)


# ----------------------------------------------------------------------------- the map
class Town:
    """Lanes of a recording: points ``(x, y, yaw)`` every metre, arc lengths, attributes."""

    def __init__(self, recording: dict, xodr_text: str) -> None:
        self.name = recording["name"]
        self.xodr_text = xodr_text
        self.lanes = recording["lanes"]
        self.points = {k: np.asarray(v["points"], dtype=np.float64) for k, v in self.lanes.items()}
        self.arcs = {
            k: np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1))])
            for k, p in self.points.items()
        }
        self.spawn_points = recording["spawn_points"]

    def length(self, key: str) -> float:
        return float(self.arcs[key][-1])

    def pose(self, key: str, s: float) -> tuple[float, float, float]:
        points, arc = self.points[key], self.arcs[key]
        s = min(max(s, 0.0), arc[-1])
        i = min(int(np.searchsorted(arc, s, side="right")) - 1, len(arc) - 2)
        t = (s - arc[i]) / max(arc[i + 1] - arc[i], 1e-9)
        x, y = points[i, :2] + t * (points[i + 1, :2] - points[i, :2])
        dx, dy = points[i + 1, :2] - points[i, :2]
        return float(x), float(y), math.degrees(math.atan2(dy, dx))

    def nearest(self, x: float, y: float) -> tuple[str, float, float]:
        """(lane, arc position, distance) of the nearest lane point."""
        best = (None, 0.0, math.inf)
        for key, points in self.points.items():
            d = np.hypot(points[:, 0] - x, points[:, 1] - y)
            i = int(np.argmin(d))
            if d[i] < best[2]:
                best = (key, float(self.arcs[key][i]), float(d[i]))
        return best


class Waypoint:
    def __init__(self, town: Town, key: str, s: float) -> None:
        self._town, self._key, self.s = town, key, float(s)
        lane = town.lanes[key]
        self.road_id, self.section_id, self.lane_id = lane["road_id"], lane["section_id"], lane["lane_id"]
        self.lane_width = lane["width"]
        self.is_junction = lane["is_junction"]
        self.lane_type = _Named("LaneType", lane["lane_type"])
        self.left_lane_marking = LaneMarking(_Named("LaneMarkingType", lane["left_marking"]))
        self.right_lane_marking = LaneMarking(_Named("LaneMarkingType", lane["right_marking"]))
        x, y, yaw = town.pose(key, self.s)
        self.transform = Transform(Location(x, y, 0.0), Rotation(yaw=yaw))

    def next(self, distance: float) -> list[Waypoint]:
        town, target = self._town, self.s + distance
        if target <= town.length(self._key) + 1e-6:
            return [Waypoint(town, self._key, target)]
        rest = target - town.length(self._key)
        return [Waypoint(town, k, min(rest, town.length(k))) for k in town.lanes[self._key]["successors"]]

    def previous(self, distance: float) -> list[Waypoint]:
        return [Waypoint(self._town, self._key, max(self.s - distance, 0.0))]

    def next_until_lane_end(self, distance: float) -> list[Waypoint]:
        town, out = self._town, []
        s = self.s + distance
        while s < town.length(self._key) - 1e-6:
            out.append(Waypoint(town, self._key, s))
            s += distance
        out.append(Waypoint(town, self._key, town.length(self._key)))
        if abs(s - town.length(self._key)) < 1e-6:
            out.append(Waypoint(town, self._key, town.length(self._key)))  # libcarla repeats a whole metre's end
        return out

    def _side(self, side: str) -> Waypoint | None:
        neighbour = self._town.lanes[self._key][side]
        if neighbour is None or neighbour["key"] not in self._town.lanes:
            return None
        return Waypoint(self._town, neighbour["key"], self.s)

    def get_left_lane(self) -> Waypoint | None:
        return self._side("left")

    def get_right_lane(self) -> Waypoint | None:
        return self._side("right")


class Map:
    def __init__(self, town: Town) -> None:
        self._town = town
        self.name = f"Carla/Maps/{town.name}"

    def get_topology(self) -> list[tuple[Waypoint, Waypoint]]:
        town = self._town
        return [(Waypoint(town, k, 0.0), Waypoint(town, k, town.length(k))) for k in town.lanes]

    def get_waypoint(self, location, project_to_road: bool = True, lane_type=LaneType.Driving) -> Waypoint | None:
        key, s, distance = self._town.nearest(location.x, location.y)
        if not project_to_road and distance > self._town.lanes[key]["width"] / 2.0:
            return None
        return Waypoint(self._town, key, s)

    def generate_waypoints(self, distance: float) -> list[Waypoint]:
        town = self._town
        return [
            Waypoint(town, key, s)
            for key in town.lanes
            for s in np.arange(0.0, town.length(key), distance)
        ]

    def get_spawn_points(self) -> list[Transform]:
        return [Transform(Location(x, y, 0.5), Rotation(yaw=yaw)) for x, y, yaw in self._town.spawn_points]

    def get_crosswalks(self) -> list[Location]:
        return []

    def to_opendrive(self) -> str:
        return self._town.xodr_text


# ----------------------------------------------------------------------------- actors
class ActorAttribute(str):
    def __int__(self) -> int:
        return int(str(self))


class ActorBlueprint:
    def __init__(self, blueprint_id: str, **attributes: str) -> None:
        self.id = blueprint_id
        self._attributes = dict(attributes)

    def has_attribute(self, id: str) -> bool:
        return id in self._attributes

    def get_attribute(self, id: str) -> ActorAttribute:
        return ActorAttribute(self._attributes[id])

    def set_attribute(self, id: str, value: str) -> None:
        if id not in self._attributes:
            raise IndexError(f"blueprint {self.id!r} has no attribute {id!r}")
        self._attributes[id] = value


class BlueprintLibrary:
    def __init__(self, blueprints: list[ActorBlueprint]) -> None:
        self._blueprints = blueprints

    def find(self, id: str) -> ActorBlueprint:
        for blueprint in self._blueprints:
            if blueprint.id == id:
                return ActorBlueprint(blueprint.id, **blueprint._attributes)
        raise IndexError(f"no blueprint {id!r}")

    def filter(self, wildcard_pattern: str) -> list[ActorBlueprint]:
        return [ActorBlueprint(b.id, **b._attributes) for b in self._blueprints if _matches(b.id, wildcard_pattern)]


def _matches(type_id: str, wildcard_pattern: str) -> bool:
    import fnmatch

    return fnmatch.fnmatch(type_id, wildcard_pattern)


EXTENTS = {
    "vehicle": (Vector3D(0.0, 0.0, 0.7), Vector3D(2.45, 1.06, 0.75)),
    "walker": (Vector3D(0.0, 0.0, 0.9), Vector3D(0.25, 0.25, 0.9)),
}


class Actor:
    def __init__(self, server: FakeServer, actor_id: int, type_id: str, transform: Transform, parent=None) -> None:
        self._server, self.id, self.type_id = server, actor_id, type_id
        self._transform = Transform(Location(transform.location.x, transform.location.y, transform.location.z),
                                    Rotation(yaw=transform.rotation.yaw))
        box = EXTENTS.get(type_id.split(".")[0], (Vector3D(), Vector3D(0.1, 0.1, 0.1)))
        self.bounding_box = BoundingBox(*box)
        self.parent = parent
        self._speed = 0.0
        self.is_alive = True

    def get_transform(self) -> Transform:
        return self._transform

    def get_location(self) -> Location:
        return self._transform.location

    def get_velocity(self) -> Vector3D:
        yaw = math.radians(self._transform.rotation.yaw)
        return Vector3D(self._speed * math.cos(yaw), self._speed * math.sin(yaw), 0.0)

    def get_acceleration(self) -> Vector3D:
        return Vector3D()

    def destroy(self) -> bool:
        return self._server.destroy(self.id)


class Vehicle(Actor):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._control = VehicleControl()
        self._autopilot_port: int | None = None
        self._lane: tuple[str, float] | None = None

    def apply_control(self, control: VehicleControl) -> None:
        self._control = control

    def get_control(self) -> VehicleControl:
        return self._control

    def set_autopilot(self, enabled: bool = True, port: int = 8000) -> None:
        self._autopilot_port = port if enabled else None


class Walker(Actor):
    pass


class WalkerAIController(Actor):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._running, self._target, self._max_speed = False, None, 1.4

    def start(self) -> None:
        if self._server.actors.get(self.parent) is None:
            raise RuntimeError("controller's walker is gone")
        self._running = True

    def stop(self) -> None:
        self._running = False

    def go_to_location(self, destination: Location) -> None:
        self._target = destination

    def set_max_speed(self, speed: float) -> None:
        self._max_speed = speed


class Sensor(Actor):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._callback = None

    def listen(self, callback) -> None:
        self._callback = callback

    def stop(self) -> None:
        self._callback = None

    def is_listening(self) -> bool:  # a method in the real client, not a property
        return self._callback is not None


class TrafficLight(Actor):
    """A fixed-time light: green, yellow, then red while the other phase runs."""

    GREEN_S, YELLOW_S = 10.0, 3.0

    def __init__(self, server, actor_id, transform, stop_waypoints, offset_s: float) -> None:
        super().__init__(server, actor_id, "traffic.traffic_light", transform)
        self._stop_waypoints, self._offset_s = stop_waypoints, offset_s

    def _phase(self) -> tuple[str, float]:
        cycle = 2 * (self.GREEN_S + self.YELLOW_S)
        t = (self._server.time_s + self._offset_s) % cycle
        if t < self.GREEN_S:
            return TrafficLightState.Green, t
        if t < self.GREEN_S + self.YELLOW_S:
            return TrafficLightState.Yellow, t - self.GREEN_S
        return TrafficLightState.Red, t - self.GREEN_S - self.YELLOW_S

    @property
    def state(self) -> str:
        return self._phase()[0]

    def get_elapsed_time(self) -> float:
        return self._phase()[1]

    def get_green_time(self) -> float:
        return self.GREEN_S

    def get_yellow_time(self) -> float:
        return self.YELLOW_S

    def get_red_time(self) -> float:
        return 2.0

    def get_stop_waypoints(self) -> list[Waypoint]:
        return list(self._stop_waypoints)


class ActorList(list):
    def filter(self, wildcard_pattern: str) -> ActorList:
        return ActorList(a for a in self if _matches(a.type_id, wildcard_pattern))


# ----------------------------------------------------------------------------- commands
class _FutureActor:
    pass


@dataclass
class Response:
    actor_id: int = 0
    error: str = ""

    def has_error(self) -> bool:
        return bool(self.error)


class SpawnActor:
    def __init__(self, blueprint, transform, parent=None) -> None:
        self.blueprint, self.transform, self.parent, self.followers = blueprint, transform, parent, []

    def then(self, command) -> SpawnActor:
        self.followers.append(command)
        return self


class SetAutopilot:
    def __init__(self, actor, enabled: bool, port: int = 8000) -> None:
        self.actor, self.enabled, self.port = actor, enabled, port


class DestroyActor:
    def __init__(self, actor_id: int) -> None:
        self.actor_id = actor_id


# ----------------------------------------------------------------------------- server
class FakeServer:
    """One scripted CARLA server: towns, one world, actors; ``hang``/``die`` on cue.

    Attributes:
        version: what ``get_server_version`` answers.
        hang_after_ticks / die_after_ticks: fail the tick after this many more ticks.
        destroyed: ids of every actor destroyed so far.
    """

    def __init__(
        self, towns: dict[str, Town], *, town: str, version: str = CLIENT_VERSION, stop_sign_lanes: tuple[str, ...] = ()
    ) -> None:
        self.stop_sign_lanes = stop_sign_lanes
        self.towns, self.version = towns, version
        self.settings = WorldSettings()
        self.actors: dict[int, Actor] = {}
        self.destroyed: list[int] = []
        self.ticks, self.time_s = 0, 0.0
        self.hang_after_ticks: int | None = None
        self.die_after_ticks: int | None = None
        self.is_dead = False
        self.traffic_managers: dict[int, TrafficManager] = {}
        self._next_id = 1000
        self._nav_rng = np.random.default_rng(0)
        self.load_s, self.load_timeouts = 0.0, []  # how long a client's load takes; the timeouts it had
        self.load(town)

    # world lifetime
    def load(self, name: str) -> None:
        self.town = self.towns[name]
        self.map = Map(self.town)
        self.actors = {}
        self.settings = WorldSettings()
        self._add_traffic_lights()
        self._add_stop_signs()

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _add_traffic_lights(self) -> None:
        """One light per lane entering a junction, at its end; phases by heading (N-S vs E-W)."""
        town = self.town
        for key, lane in sorted(town.lanes.items()):
            enters_junction = any(town.lanes[s]["is_junction"] for s in lane["successors"] if s in town.lanes)
            if lane["is_junction"] or not enters_junction:
                continue
            stop = Waypoint(town, key, max(town.length(key) - 1.0, 0.0))
            yaw = stop.transform.rotation.yaw % 180.0
            offset = 0.0 if (yaw < 45.0 or yaw > 135.0) else TrafficLight.GREEN_S + TrafficLight.YELLOW_S
            light = TrafficLight(self, self._new_id(), stop.transform, [stop], offset)
            self.actors[light.id] = light

    def _add_stop_signs(self) -> None:
        """A sign 3 m right of each chosen lane's end; its trigger volume lies on the lane."""
        for key in self.stop_sign_lanes:
            x, y, yaw = self.town.pose(key, self.town.length(key) - 2.0)
            right = math.radians(yaw + 90.0)  # the driver's right in CARLA's frame
            sign = Actor(self, self._new_id(), "traffic.stop",
                         Transform(Location(x + 3.0 * math.cos(right), y + 3.0 * math.sin(right), 0.0),
                                   Rotation(yaw=yaw)))  # fmt: skip
            sign.trigger_volume = BoundingBox(Vector3D(0.0, -3.0, 0.0), Vector3D(1.5, 1.5, 1.0))
            self.actors[sign.id] = sign

    def check(self) -> None:
        if self.is_dead:
            raise RuntimeError("time-out of 2000ms while waiting for the simulator (server is dead)")

    # spawning
    def spawn(self, blueprint: ActorBlueprint, transform: Transform, parent: int | None = None) -> Actor:
        self.check()
        kind = blueprint.id.split(".")[0]
        if kind == "vehicle" and self._blocked(transform.location, 2.5):
            raise RuntimeError("Spawn failed because of collision at spawn position")
        cls = {"vehicle": Vehicle, "walker": Walker, "sensor": Sensor}.get(kind)
        if blueprint.id == "controller.ai.walker":
            cls = WalkerAIController
        if cls is None:
            raise RuntimeError(f"cannot spawn {blueprint.id}")
        actor = cls(self, self._new_id(), blueprint.id, transform, parent=parent)
        if kind == "vehicle":
            key, s, _ = self.town.nearest(transform.location.x, transform.location.y)
            actor._lane = (key, s)
        self.actors[actor.id] = actor
        return actor

    def _blocked(self, location: Location, radius: float) -> bool:
        return any(
            isinstance(a, (Vehicle, Walker)) and a.get_location().distance(location) < radius
            for a in self.actors.values()
        )

    def destroy(self, actor_id: int) -> bool:
        actor = self.actors.pop(actor_id, None)
        if actor is None:
            return False
        actor.is_alive = False
        self.destroyed.append(actor_id)
        return True

    # ticking
    def tick(self) -> int:
        self.check()
        if self.die_after_ticks is not None:
            if self.die_after_ticks == 0:
                self.is_dead = True
                self.check()
            self.die_after_ticks -= 1
        if self.hang_after_ticks is not None:
            if self.hang_after_ticks == 0:
                raise RuntimeError("time-out of 2000ms while waiting for the simulator, make sure it is ready")
            self.hang_after_ticks -= 1
        dt = self.settings.fixed_delta_seconds or 0.05
        for actor in list(self.actors.values()):
            if isinstance(actor, Vehicle):
                if actor._autopilot_port is not None:
                    self._drive_autopilot(actor, dt)
                elif actor.type_id == "vehicle.lincoln.mkz_2017":
                    self._drive_kinematic(actor, dt)
            elif isinstance(actor, WalkerAIController) and actor._running and actor._target is not None:
                self._walk(actor, dt)
        self._fire_collisions()
        self.ticks += 1
        self.time_s += dt
        return self.ticks

    def _drive_kinematic(self, car: Vehicle, dt: float) -> None:
        c = car.get_control()
        accel = 3.0 * c.throttle - 8.0 * c.brake
        car._speed = max(car._speed + accel * dt, 0.0)
        t = car.get_transform()
        yaw_rate = car._speed / 2.9 * math.tan(math.radians(70.0) * c.steer)
        t.rotation.yaw += math.degrees(yaw_rate * dt)
        yaw = math.radians(t.rotation.yaw)
        t.location.x += car._speed * math.cos(yaw) * dt
        t.location.y += car._speed * math.sin(yaw) * dt

    def _drive_autopilot(self, car: Vehicle, dt: float) -> None:
        key, s = car._lane
        manager = self.traffic_managers.get(car._autopilot_port)
        rng = manager._rng if manager is not None else np.random.default_rng(0)
        red = any(
            isinstance(a, TrafficLight) and a.state != TrafficLightState.Green
            and any(w._key == key for w in a.get_stop_waypoints())
            for a in self.actors.values()
        )  # fmt: skip
        car._speed = 6.0
        s += car._speed * dt
        if s >= self.town.length(key):
            successors = self.town.lanes[key]["successors"]
            if red or not successors:
                s, car._speed = self.town.length(key) - (1.0 if red else 0.0), 0.0
            else:
                s, key = s - self.town.length(key), successors[int(rng.integers(len(successors)))]
        car._lane = (key, s)
        x, y, yaw = self.town.pose(key, s)
        car._transform = Transform(Location(x, y, 0.0), Rotation(yaw=yaw))

    def _walk(self, controller: WalkerAIController, dt: float) -> None:
        walker = self.actors.get(controller.parent)
        if walker is None:
            return
        here, there = walker.get_location(), controller._target
        dx, dy = there.x - here.x, there.y - here.y
        distance = math.hypot(dx, dy)
        walker._speed = min(controller._max_speed, distance / dt)
        if distance > 1e-6:
            walker._transform.rotation.yaw = math.degrees(math.atan2(dy, dx))
            step = min(distance, controller._max_speed * dt)
            here.x, here.y = here.x + dx / distance * step, here.y + dy / distance * step

    def _fire_collisions(self) -> None:
        for sensor in [a for a in self.actors.values() if isinstance(a, Sensor) and a._callback is not None]:
            owner = self.actors.get(sensor.parent)
            if owner is None:
                continue
            if sensor.type_id == "sensor.other.lane_invasion":
                self._fire_lane_invasion(sensor, owner)
                continue
            for other in self.actors.values():
                if other is owner or not isinstance(other, (Vehicle, Walker)):
                    continue
                reach = owner.bounding_box.extent.y + other.bounding_box.extent.y
                if owner.get_location().distance(other.get_location()) < reach:
                    sensor._callback(types.SimpleNamespace(other_actor=other, frame=self.ticks))

    def _fire_lane_invasion(self, sensor: Sensor, owner: Actor) -> None:
        """An event when the car's centre leaves its lane (a line crossed), once per departure."""
        key, _, distance = self.town.nearest(owner.get_location().x, owner.get_location().y)
        outside = distance > self.town.lanes[key]["width"] / 2.0
        if outside and not getattr(sensor, "was_outside", False):
            marking = LaneMarking(_Named("LaneMarkingType", self.town.lanes[key]["right_marking"]))
            sensor._callback(types.SimpleNamespace(crossed_lane_markings=[marking], frame=self.ticks))
        sensor.was_outside = outside

    def random_navigation_location(self) -> Location:
        """A point on a lane's kerb side (the recording has no sidewalks)."""
        keys = sorted(self.town.lanes)
        key = keys[int(self._nav_rng.integers(len(keys)))]
        x, y, yaw = self.town.pose(key, float(self._nav_rng.uniform(0.0, self.town.length(key))))
        side = self.town.lanes[key]["width"] / 2.0 + 1.5
        return Location(x - side * math.sin(math.radians(yaw)), y + side * math.cos(math.radians(yaw)), 0.0)


class TrafficManager:
    def __init__(self, port: int) -> None:
        self._port, self._synchronous, self._rng = port, False, np.random.default_rng(0)

    def set_synchronous_mode(self, mode_switch: bool) -> None:
        self._synchronous = mode_switch

    def set_random_device_seed(self, value: int) -> None:
        self._rng = np.random.default_rng(value)

    def get_port(self) -> int:
        return self._port


class World:
    def __init__(self, server: FakeServer) -> None:
        self._server = server

    def get_settings(self) -> WorldSettings:
        self._server.check()
        return self._server.settings.copy()

    def apply_settings(self, world_settings: WorldSettings) -> int:
        self._server.check()
        self._server.settings = world_settings.copy()
        return self._server.ticks

    def tick(self, seconds: float = 0.0) -> int:
        return self._server.tick()

    def get_map(self) -> Map:
        return self._server.map

    def get_blueprint_library(self) -> BlueprintLibrary:
        return BlueprintLibrary([
            ActorBlueprint("vehicle.lincoln.mkz_2017", role_name="", number_of_wheels="4"),
            ActorBlueprint("vehicle.audi.a2", role_name="", number_of_wheels="4"),
            ActorBlueprint("vehicle.tesla.model3", role_name="", number_of_wheels="4"),
            ActorBlueprint("vehicle.yamaha.yzf", role_name="", number_of_wheels="2"),
            ActorBlueprint("walker.pedestrian.0001", is_invincible="true"),
            ActorBlueprint("walker.pedestrian.0002", is_invincible="true"),
            ActorBlueprint("controller.ai.walker"),
            ActorBlueprint("sensor.other.collision"),
            ActorBlueprint("sensor.other.lane_invasion"),
        ])  # fmt: skip

    def try_spawn_actor(self, blueprint, transform, attach_to=None):
        try:
            return self.spawn_actor(blueprint, transform, attach_to)
        except RuntimeError:
            return None

    def spawn_actor(self, blueprint, transform, attach_to=None):
        return self._server.spawn(blueprint, transform, attach_to.id if attach_to is not None else None)

    def get_actors(self, actor_ids=None) -> ActorList:
        self._server.check()
        actors = self._server.actors
        if actor_ids is None:
            return ActorList(actors.values())
        return ActorList(actors[i] for i in actor_ids if i in actors)

    def set_pedestrians_seed(self, seed: int) -> None:
        self._server._nav_rng = np.random.default_rng(seed)

    def get_random_location_from_navigation(self) -> Location:
        return self._server.random_navigation_location()


class Client:
    """Talks to the ``FakeServer`` registered on its port, or times out like the real one."""

    def __init__(self, host: str, port: int, worker_threads: int = 0) -> None:
        self._host, self._port, self._timeout = host, port, 5.0

    @property
    def _server(self) -> FakeServer:
        server = SERVERS.get(self._port, SERVERS.get(0))  # 0: answers on any port
        if server is None or server.is_dead:
            raise RuntimeError(
                f"time-out of {int(self._timeout * 1000)}ms while waiting for the simulator, "
                f"make sure the simulator is ready and connected to {self._host}:{self._port}"
            )
        return server

    def set_timeout(self, second: float) -> None:
        self._timeout = second

    def get_client_version(self) -> str:
        return CLIENT_VERSION

    def get_server_version(self) -> str:
        return self._server.version

    def get_available_maps(self) -> list[str]:
        return [f"/Game/Carla/Maps/{name}" for name in self._server.towns]

    def get_world(self) -> World:
        return World(self._server)

    def load_world(self, map_name: str, reset_settings: bool = True) -> World:
        server = self._server
        self._wait_for_load(server)
        server.load(map_name.rsplit("/", 1)[-1])
        return World(server)

    def _wait_for_load(self, server: FakeServer) -> None:
        """A load takes ``server.load_s``: longer than this client's timeout, it times out."""
        server.load_timeouts.append(self._timeout)
        if server.load_s > self._timeout:
            raise RuntimeError(
                f"time-out of {int(self._timeout * 1000)}ms while waiting for the simulator, "
                "make sure the simulator is ready and connected to localhost:2000"
            )

    def generate_opendrive_world(self, opendrive: str, parameters=None, reset_settings: bool = True) -> World:
        server = self._server
        self._wait_for_load(server)
        digest = hashlib.sha256(opendrive.encode("utf-8")).hexdigest()
        for name, town in server.towns.items():
            if hashlib.sha256(town.xodr_text.encode("utf-8")).hexdigest() == digest:
                server.load(name)
                return World(server)
        raise RuntimeError("this fake server only builds worlds from the recorded OpenDRIVE files")

    def get_trafficmanager(self, client_connection: int = 8000) -> TrafficManager:
        return self._server.traffic_managers.setdefault(client_connection, TrafficManager(client_connection))

    def apply_batch_sync(self, commands, do_tick: bool = False) -> list[Response]:
        server, responses = self._server, []
        for command in commands:
            if isinstance(command, DestroyActor):
                ok = server.destroy(command.actor_id)
                responses.append(Response(command.actor_id, "" if ok else "actor not found"))
                continue
            try:
                actor = server.spawn(command.blueprint, command.transform, command.parent)
            except RuntimeError as exc:
                responses.append(Response(0, str(exc)))
                continue
            for follower in command.followers:
                if isinstance(follower, SetAutopilot):
                    actor.set_autopilot(follower.enabled, follower.port)
            responses.append(Response(actor.id, ""))
        if do_tick:
            server.tick()
        return responses


SERVERS: dict[int, FakeServer] = {}


def load_town(name: str = "grid_town") -> Town:
    recording = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return Town(recording, (DATA / f"{name}.xodr").read_text(encoding="utf-8"))


def load_fake_carla() -> types.ModuleType:
    """A fresh ``carla`` stand-in module (with its own, empty server registry)."""
    module = types.ModuleType("carla")
    for name in (
        "Vector3D", "Location", "Rotation", "Transform", "BoundingBox", "LaneType", "TrafficLightState",
        "VehicleControl", "WorldSettings", "OpendriveGenerationParameters", "Client", "Waypoint", "Map",
    ):  # fmt: skip
        setattr(module, name, globals()[name])
    module.command = types.SimpleNamespace(
        SpawnActor=SpawnActor, SetAutopilot=SetAutopilot, DestroyActor=DestroyActor, FutureActor=_FutureActor()
    )
    SERVERS.clear()
    module.SERVERS = SERVERS
    return module
