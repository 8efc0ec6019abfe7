"""Decoding the ego's context-subscription rows into actor boxes."""

import numpy as np
import pytest

from found_rl.sim.sumo import runtime
from found_rl.sim.sumo.actors import ContextSubscription
from found_rl.sim.sumo.traffic import WALKER_SIZE_M
from found_rl.world.frames import SumoFrame

ts = runtime.import_libsumo()
FRAME = SumoFrame((12.5, 30.0))


def subscription_rows(rng: np.random.Generator, vehicles: int, walkers: int) -> dict:
    seen: dict = {"ego": {}}
    for k in range(vehicles):
        seen[f"veh{k}"] = {
            ts.VAR_POSITION: tuple(rng.uniform(-50, 150, 2)),
            ts.VAR_ANGLE: float(rng.uniform(0, 360)),
            ts.VAR_SPEED: float(rng.uniform(0, 15)),
            ts.VAR_LENGTH: float(rng.uniform(3.5, 5.5)),
            ts.VAR_WIDTH: float(rng.uniform(1.6, 2.1)),
        }
    for k in range(walkers):
        seen[f"walker{k}"] = {
            ts.VAR_POSITION: tuple(rng.uniform(-50, 150, 2)),
            ts.VAR_ANGLE: float(rng.uniform(0, 360)),
            ts.VAR_SPEED: float(rng.uniform(0, 2)),
        }
    return seen


@pytest.mark.parametrize("vehicles, walkers", [(7, 3), (1, 0), (0, 2), (60, 20)])
def test_boxes_match_the_vectorised_frame_conversion(vehicles, walkers):
    seen = subscription_rows(np.random.default_rng(vehicles), vehicles, walkers)
    got_vehicles, got_walkers = ContextSubscription(ts, FRAME, 50.0).boxes(seen)

    assert got_vehicles.ids == tuple(f"veh{k}" for k in range(vehicles))
    assert got_walkers.ids == tuple(f"walker{k}" for k in range(walkers))
    for boxes, is_vehicle in ((got_vehicles, True), (got_walkers, False)):
        rows = [seen[i] for i in boxes.ids]
        if not rows:
            assert boxes.xy.shape == (0, 2) and boxes.half_extent.shape == (0, 2)
            continue
        front = np.array([r[ts.VAR_POSITION] for r in rows])
        angle = np.array([r[ts.VAR_ANGLE] for r in rows])
        half_length = np.array([r[ts.VAR_LENGTH] / 2 if is_vehicle else 0.0 for r in rows])
        centre, yaw = FRAME.front_to_centre_carla(front, angle, half_length)
        np.testing.assert_allclose(boxes.xy, centre, atol=1e-9)
        assert ((boxes.yaw_deg >= -180.0) & (boxes.yaw_deg < 180.0)).all()
        np.testing.assert_allclose(np.cos(np.radians(boxes.yaw_deg - yaw)), 1.0)
        heading = np.stack([np.cos(np.radians(yaw)), np.sin(np.radians(yaw))], axis=1)
        speed = np.array([r[ts.VAR_SPEED] for r in rows])
        np.testing.assert_allclose(boxes.velocity_xy, heading * speed[:, None], atol=1e-9)
        expected_half = (
            np.array([[r[ts.VAR_LENGTH] / 2, r[ts.VAR_WIDTH] / 2] for r in rows])
            if is_vehicle
            else np.full((len(rows), 2), WALKER_SIZE_M / 2)
        )
        np.testing.assert_array_equal(boxes.half_extent, expected_half)
        for array in (boxes.xy, boxes.yaw_deg, boxes.half_extent, boxes.velocity_xy):
            assert array.dtype == np.float64 and array.flags.c_contiguous


def test_a_view_with_only_the_ego_has_no_actors():
    vehicles, walkers = ContextSubscription(ts, FRAME, 50.0).boxes({"ego": {}})
    assert len(vehicles) == len(walkers) == 0
    assert vehicles.xy.shape == (0, 2) and walkers.velocity_xy.shape == (0, 2)
