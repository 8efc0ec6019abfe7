"""Ego-safe spawning: the envelope's arithmetic, and a standing ego amid saturated insertion."""

import math

import numpy as np
import pytest

from found_rl.actions import Controls
from found_rl.scenario import load_scenario
from found_rl.sim.backend import make_backend
from found_rl.sim.sumo.spawn_safety import (
    BACKGROUND_DECEL_MPS2,
    MARGIN_M,
    REACTION_S,
    WALKER_MIN_M,
    EgoEnvelope,
    stopping_gap_m,
)
from found_rl.sim.sumo.traffic import EGO_ID

BRAKE = Controls(0.0, 0.0, 1.0)


def envelope(speed_mps: float = 0.0) -> EgoEnvelope:
    return EgoEnvelope(np.zeros(2), np.array([1.0, 0.0]), speed_mps, 2.4, 8.0)


def test_stopping_gap_is_reaction_plus_braking_plus_margin():
    assert stopping_gap_m(0.0, 4.5) == MARGIN_M
    assert stopping_gap_m(15.0, 4.5) == pytest.approx(15 * REACTION_S + 225 / 9 + MARGIN_M)


def test_a_car_behind_needs_room_to_stop_from_its_departure_speed():
    ego = envelope()
    need_m = stopping_gap_m(16.0, BACKGROUND_DECEL_MPS2)  # 13.9 m/s limit x 1.15
    # Gap counted from the ego's rear (2.4 m behind its centre) to the car's reach (5 m).
    edge_m = -(2.4 + 5.0 + need_m)
    assert ego.allows_vehicle(np.array([edge_m - 0.1, 0.0]), 16.0, 5.0)
    assert not ego.allows_vehicle(np.array([edge_m + 0.1, 0.0]), 16.0, 5.0)
    # The case from the issue: 1.6 m behind at 13.9 m/s, and 15.5 m behind at 50 km/h.
    assert not ego.allows_vehicle(np.array([-2.4 - 1.6, 0.0]), 13.9, 0.0)
    assert not ego.allows_vehicle(np.array([-2.4 - 15.5, 0.0]), 50 / 3.6, 0.0)
    # Straight-line distance: a car on the neighbouring lane is judged the same way.
    assert not ego.allows_vehicle(np.array([-10.0, 3.5]), 13.9, 4.6)


def test_a_car_ahead_must_leave_the_ego_its_stopping_distance():
    assert envelope(0.0).allows_vehicle(np.array([2.4 + 4.6 + MARGIN_M + 0.1, 0.0]), 13.9, 4.6)
    moving = envelope(10.0)
    need_m = stopping_gap_m(10.0, 8.0)
    assert not moving.allows_vehicle(np.array([2.4 + 4.6 + need_m - 0.1, 0.0]), 0.0, 4.6)
    assert moving.allows_vehicle(np.array([2.4 + 4.6 + need_m + 0.1, 0.0]), 0.0, 4.6)


def test_walkers_keep_clear_of_the_ego_and_its_path():
    assert not envelope().allows_walker(np.array([-2.4 - WALKER_MIN_M + 0.1, 0.0]))
    assert envelope().allows_walker(np.array([-2.4 - WALKER_MIN_M - 0.1, 0.0]))
    ahead_m = 2.4 + stopping_gap_m(12.0, 8.0)
    assert not envelope(12.0).allows_walker(np.array([ahead_m - 0.1, 4.0 * 0]))
    assert envelope(12.0).allows_walker(np.array([ahead_m + 0.1, 0.0]))


@pytest.fixture(scope="module")
def saturated(write_scenario):
    """A small grid flooded with short trips, so cars are inserted near the ego all the time."""
    backend = make_backend(
        load_scenario(
            write_scenario(
                {
                    "traffic": {"vehicles": 80, "walkers": 30, "warmup_s": 10},
                    "routes": {"random_length_m": 60},
                }
            )
        )
    )
    yield backend
    backend.close()


def _spawns_near_a_standing_ego(backend, seed: int, steps: int):
    """(gap m, speed m/s, behind) of every car, and the gap of every walker, that appears near the ego.

    The ego brakes at its spawn point for ``steps`` steps; cars are recorded when kept at reset
    or inserted by SUMO within 60 m, walkers when they start (at reset or on respawn).
    """
    ts = backend._libsumo
    snapshot = backend.reset(seed=seed)
    ego_xy = backend.frame.to_sumo_xy(snapshot.ego.xy)
    yaw = math.radians(snapshot.ego.yaw_deg)
    heading = backend.frame.to_sumo_xy(snapshot.ego.xy + np.array([math.cos(yaw), math.sin(yaw)])) - ego_xy
    half_length = snapshot.ego.half_extent[0]
    cars, walker_gaps, collisions = [], [], []

    def record_cars(vehicles) -> None:
        for vehicle in vehicles:
            if vehicle == EGO_ID:
                continue
            offset = np.asarray(ts.vehicle.getPosition(vehicle)) - ego_xy  # the car's front
            if math.hypot(*offset) > 60.0:
                continue
            behind = float(offset @ heading) < 0.0
            # Behind: the car's front to the ego's rear; ahead: the car's rear to the ego's front.
            reach = 0.0 if behind else ts.vehicle.getLength(vehicle)
            cars.append((math.hypot(*offset) - half_length - reach, ts.vehicle.getSpeed(vehicle), behind))

    def record_walkers(walkers) -> None:
        walker_gaps.extend(math.hypot(*(np.asarray(ts.person.getPosition(w)) - ego_xy)) - half_length for w in walkers)

    record_cars(ts.vehicle.getIDList())  # everything kept at reset
    walkers = set(ts.person.getIDList())
    record_walkers(walkers)
    for _ in range(steps):
        snapshot = backend.step(BRAKE)
        record_cars(ts.simulation.getDepartedIDList())
        now = set(ts.person.getIDList())
        record_walkers(now - walkers)
        walkers = now
        collisions += list(snapshot.ego_collided_with)
    assert snapshot.ego.speed_mps == 0.0
    return cars, walker_gaps, collisions


def test_no_car_or_walker_appears_where_a_crash_with_a_standing_ego_is_unavoidable(saturated):
    cars, walker_gaps, collisions = [], [], []
    for seed in range(4):
        found = _spawns_near_a_standing_ego(saturated, seed, steps=250)
        cars += found[0]
        walker_gaps += found[1]
        collisions += found[2]
    behind = [(gap, speed) for gap, speed, is_behind in cars if is_behind]
    assert len(behind) >= 20 and len(cars) >= 60  # the scene does put cars near the ego
    for gap_m, speed_mps in behind:
        assert gap_m >= speed_mps**2 / (2 * BACKGROUND_DECEL_MPS2), (gap_m, speed_mps)
    assert all(gap_m > 0.0 for gap_m, _, is_behind in cars if not is_behind)
    assert collisions == []
    # Walkers start outside WALKER_MIN_M (less the 0.1 s they walk before it is seen).
    assert len(walker_gaps) >= 30 and min(walker_gaps) >= WALKER_MIN_M - 0.5
