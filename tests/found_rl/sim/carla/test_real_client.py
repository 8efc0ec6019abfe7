"""Checks against the real ``carla`` client, where it is installed (no server needed).

``carla.Map(name, xodr)`` parses OpenDRIVE in the client, so the town geometry and route
planning run on libcarla itself; the stand-in's API surface is checked against the real one.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA

carla = pytest.importorskip("carla")

import fake_carla  # noqa: E402

from found_rl.routes.town_planner import TownRoutePlanner  # noqa: E402
from found_rl.sim.carla.connection import SUPPORTED_SERVER_VERSIONS, CarlaEndpoint, connect  # noqa: E402
from found_rl.sim.carla.errors import CarlaSetupError  # noqa: E402
from found_rl.sim.carla.town_geometry import extract_town_geometry  # noqa: E402


def test_the_stand_in_uses_only_names_the_real_client_has():
    pairs = {
        carla.Client: fake_carla.Client, carla.World: fake_carla.World, carla.Map: fake_carla.Map,
        carla.Waypoint: fake_carla.Waypoint, carla.TrafficLight: fake_carla.TrafficLight,
        carla.TrafficManager: fake_carla.TrafficManager, carla.WalkerAIController: fake_carla.WalkerAIController,
        carla.Sensor: fake_carla.Sensor, carla.Vehicle: fake_carla.Vehicle,
        carla.WorldSettings: fake_carla.WorldSettings,
        carla.ActorBlueprint: fake_carla.ActorBlueprint, carla.BlueprintLibrary: fake_carla.BlueprintLibrary,
    }  # fmt: skip
    for real, fake in pairs.items():
        public = {n for n in vars(fake) if not n.startswith("_") and n not in ("copy", "GREEN_S", "YELLOW_S")}
        missing = sorted(n for n in public if not hasattr(real, n))
        assert not missing, f"{fake.__name__}: {missing} are not in carla.{real.__name__}"
    for name in ("SpawnActor", "SetAutopilot", "DestroyActor", "FutureActor"):
        assert hasattr(carla.command, name)
    assert carla.Client("localhost", 1).get_client_version() in SUPPORTED_SERVER_VERSIONS


def test_town_geometry_from_libcarla_matches_the_recording():
    town = carla.Map("GridTown", (DATA / "grid_town.xodr").read_text())
    real = extract_town_geometry(town, "real")
    recorded = extract_town_geometry(fake_carla.Map(fake_carla.load_town()), "recorded")
    assert real.lanes.keys() == recorded.lanes.keys()
    for key, lane in real.lanes.items():
        other = recorded.lanes[key]
        assert lane.successors == other.successors and lane.is_junction == other.is_junction
        np.testing.assert_allclose(lane.centerline[[0, -1]], other.centerline[[0, -1]], atol=0.02)
    planner = TownRoutePlanner(real)
    from found_rl.routes import parse_routes

    lengths = [planner.plan(spec).length_m for spec in parse_routes(DATA / "grid_town_routes.xml")]
    assert lengths[0] == pytest.approx(70.0, abs=0.05)


def test_no_server_fails_in_seconds_with_the_real_client():
    """The real client waits its whole timeout even on a refused port; the TCP probe does not."""
    import time

    started = time.monotonic()
    with pytest.raises(CarlaSetupError, match=r"no CARLA server answered at localhost:2987 \(2 tries of 20 s\)"):
        connect(carla, CarlaEndpoint(port=2987, timeout_s=20.0, retries=2), retry_wait_s=0.1)
    assert time.monotonic() - started < 5.0
