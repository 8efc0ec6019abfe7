"""The ego's collision and lane-invasion sensors, drained once per tick."""

from __future__ import annotations

import threading


class EgoSensors:
    """Collision and lane-invasion sensors attached to the ego.

    CARLA calls the callbacks from its client threads, so events are collected under a lock
    and handed out by :meth:`drain` after each tick. They are hints beside the geometric
    infraction checks (which decide), and a record to cross-check them against.
    """

    def __init__(self, world, carla, ego) -> None:
        library = world.get_blueprint_library()
        self._lock = threading.Lock()
        self._collisions: list[str] = []
        self._invasions: list[str] = []
        attach = carla.Transform()
        self.collision = world.spawn_actor(library.find("sensor.other.collision"), attach, attach_to=ego)
        self.lane_invasion = world.spawn_actor(library.find("sensor.other.lane_invasion"), attach, attach_to=ego)
        self.collision.listen(self._on_collision)
        self.lane_invasion.listen(self._on_lane_invasion)

    @property
    def actor_ids(self) -> list[int]:
        return [self.collision.id, self.lane_invasion.id]

    def _on_collision(self, event) -> None:
        with self._lock:
            self._collisions.append(str(event.other_actor.id))

    def _on_lane_invasion(self, event) -> None:
        kinds = [str(marking.type).rsplit(".", 1)[-1] for marking in event.crossed_lane_markings]
        with self._lock:
            self._invasions.extend(kinds)

    def drain(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(actor ids hit, lane-marking types crossed) since the last call, each id once."""
        with self._lock:
            collisions, self._collisions = self._collisions, []
            invasions, self._invasions = self._invasions, []
        return tuple(dict.fromkeys(collisions)), tuple(invasions)

    def stop(self) -> None:
        for sensor in (self.collision, self.lane_invasion):
            sensor.stop()
