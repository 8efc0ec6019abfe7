"""Spawning, reading and destroying the actors a CARLA backend owns.

Everything spawned is recorded by id in an :class:`ActorLedger`, and destroyed in one batch of
``DestroyActor`` commands on reset and close, so no episode leaks actors into the next and
actors someone else spawned on the server are never touched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from found_rl.world import ActorBoxes

EGO_BLUEPRINT = "vehicle.lincoln.mkz_2017"
EGO_SPAWN_TRIES = 10
EGO_SPAWN_STEP_M = 2.0
SPAWN_CLEARANCE_M = 15.0
WALKER_SPEED_MPS = (1.0, 1.6)


class EgoSpawnBlocked(RuntimeError):
    """Every spot tried near the route start was taken (the server itself is fine)."""


@dataclass
class ActorLedger:
    """Ids of the actors this backend spawned, by kind (controllers stop before destruction)."""

    vehicles: list = field(default_factory=list)
    walkers: list = field(default_factory=list)
    controllers: list = field(default_factory=list)
    sensors: list = field(default_factory=list)
    ego: object | None = None

    def all_ids(self) -> list[int]:
        actors = [*self.sensors, *self.controllers, *self.walkers, *self.vehicles]
        ids = [actor.id for actor in actors]
        return ids + ([self.ego.id] if self.ego is not None else [])


def destroy_all(client, carla, ledger: ActorLedger) -> None:
    """Stop controllers and sensors, then destroy every recorded actor in one batch."""
    for controller in ledger.controllers:
        controller.stop()
    ids = ledger.all_ids()
    if ids:
        client.apply_batch_sync([carla.command.DestroyActor(i) for i in ids], False)
    ledger.vehicles, ledger.walkers, ledger.controllers, ledger.sensors, ledger.ego = [], [], [], [], None


def spawn_ego(world, carla, route_xy: np.ndarray, route_yaw: np.ndarray, ground_z):
    """Spawn the ego at the route start; a blocked spot moves it 2 m along the route, 10 times.

    ``ground_z(x, y)`` gives the road height there (towns have hills and bridges); the ego is
    dropped from 0.5 m above it.

    Returns:
        ``(actor, route index)`` of the spawn.

    Raises:
        EgoSpawnBlocked: every try was blocked.
    """
    blueprint = world.get_blueprint_library().find(EGO_BLUEPRINT)
    blueprint.set_attribute("role_name", "hero")
    along = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(route_xy, axis=0), axis=1))])
    for attempt in range(EGO_SPAWN_TRIES):
        index = min(int(np.searchsorted(along, attempt * EGO_SPAWN_STEP_M)), len(route_xy) - 1)
        x, y = route_xy[index]
        location = carla.Location(x=float(x), y=float(y), z=ground_z(float(x), float(y)) + 0.5)
        transform = carla.Transform(location, carla.Rotation(yaw=float(route_yaw[index])))
        ego = world.try_spawn_actor(blueprint, transform)
        if ego is not None:
            return ego, index
    raise EgoSpawnBlocked(
        f"could not spawn the ego within {EGO_SPAWN_TRIES * EGO_SPAWN_STEP_M:g} m of the route start: "
        "every spot was blocked"
    )


def _blueprints(world, pattern: str, rng: np.random.Generator, count: int) -> list:
    library = sorted(world.get_blueprint_library().filter(pattern), key=lambda bp: bp.id)
    if pattern.startswith("vehicle"):
        library = [
            bp for bp in library
            if not bp.has_attribute("number_of_wheels") or int(bp.get_attribute("number_of_wheels")) == 4
        ]  # fmt: skip
    if not library:
        raise RuntimeError(f"the server's blueprint library has no {pattern!r} blueprints")
    return [library[int(i)] for i in rng.integers(len(library), size=count)]


def spawn_vehicles(client, world, carla, count: int, rng, spawn_points: list, avoid_xy: np.ndarray, tm_port: int):
    """Spawn up to ``count`` autopilot vehicles on free spawn points away from ``avoid_xy``."""
    free = [
        t for t in spawn_points
        if math.hypot(t.location.x - avoid_xy[0], t.location.y - avoid_xy[1]) > SPAWN_CLEARANCE_M
    ]  # fmt: skip
    chosen = [free[int(i)] for i in rng.permutation(len(free))[:count]]
    commands = []
    for blueprint, transform in zip(_blueprints(world, "vehicle.*", rng, len(chosen)), chosen):
        if blueprint.has_attribute("role_name"):
            blueprint.set_attribute("role_name", "autopilot")
        spawn = carla.command.SpawnActor(blueprint, transform)
        commands.append(spawn.then(carla.command.SetAutopilot(carla.command.FutureActor, True, tm_port)))
    ids = [r.actor_id for r in client.apply_batch_sync(commands, False) if not r.error] if commands else []
    return list(world.get_actors(ids)) if ids else []


def spawn_walkers(client, world, carla, count: int, rng, avoid_xy: np.ndarray):
    """Spawn up to ``count`` walkers on the navigation mesh, each with an AI controller.

    Returns:
        ``(walkers, controllers)``; controllers start on the next tick (see :func:`start_walkers`).
    """
    spots = []
    for _ in range(3 * count):
        if len(spots) == count:
            break
        location = world.get_random_location_from_navigation()
        if location is not None and math.hypot(location.x - avoid_xy[0], location.y - avoid_xy[1]) > 5.0:
            spots.append(location)
    commands = []
    for blueprint, location in zip(_blueprints(world, "walker.pedestrian.*", rng, len(spots)), spots):
        if blueprint.has_attribute("is_invincible"):
            blueprint.set_attribute("is_invincible", "false")
        commands.append(carla.command.SpawnActor(blueprint, carla.Transform(location, carla.Rotation())))
    walker_ids = [r.actor_id for r in client.apply_batch_sync(commands, False) if not r.error] if commands else []
    if not walker_ids:
        return [], []
    controller_bp = world.get_blueprint_library().find("controller.ai.walker")
    commands = [carla.command.SpawnActor(controller_bp, carla.Transform(), walker) for walker in walker_ids]
    responses = client.apply_batch_sync(commands, False)
    kept = [(w, r.actor_id) for w, r in zip(walker_ids, responses) if not r.error]
    # A walker without a controller would stand still forever: drop it.
    orphans = [w for w, r in zip(walker_ids, responses) if r.error]
    if orphans:
        client.apply_batch_sync([carla.command.DestroyActor(w) for w in orphans], False)
    walkers = list(world.get_actors([w for w, _ in kept]))
    controllers = list(world.get_actors([c for _, c in kept]))
    return walkers, controllers


def start_walkers(world, controllers: list, rng) -> None:
    """Send each walker's AI controller to a random destination at a seeded speed."""
    for controller in controllers:
        destination = world.get_random_location_from_navigation()
        controller.start()
        if destination is not None:  # None: the map has no navigation mesh
            controller.go_to_location(destination)
        controller.set_max_speed(float(rng.uniform(*WALKER_SPEED_MPS)))


def actor_boxes(actors: list, centre_xy: np.ndarray, radius_m: float) -> ActorBoxes:
    """Oriented boxes of ``actors`` within ``radius_m`` of ``centre_xy`` (their last tick)."""
    rows = []
    for actor in actors:
        transform = actor.get_transform()
        location = transform.location
        if math.hypot(location.x - centre_xy[0], location.y - centre_xy[1]) > radius_m:
            continue
        box = actor.bounding_box
        yaw = math.radians(transform.rotation.yaw)
        # The box centre is offset from the actor origin in the actor's frame.
        dx, dy = box.location.x, box.location.y
        x = location.x + dx * math.cos(yaw) - dy * math.sin(yaw)
        y = location.y + dx * math.sin(yaw) + dy * math.cos(yaw)
        velocity = actor.get_velocity()
        rows.append((str(actor.id), x, y, transform.rotation.yaw, box.extent.x, box.extent.y, velocity.x, velocity.y))
    if not rows:
        return ActorBoxes.empty()
    ids, x, y, yaw, ex, ey, vx, vy = zip(*rows)
    return ActorBoxes(
        ids=tuple(ids),
        xy=np.column_stack([x, y]).astype(np.float64),
        yaw_deg=np.asarray(yaw, dtype=np.float64),
        half_extent=np.column_stack([ex, ey]).astype(np.float64),
        velocity_xy=np.column_stack([vx, vy]).astype(np.float64),
    )
