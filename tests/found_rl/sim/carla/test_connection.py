"""Endpoints from the environment and version checks (no server involved)."""

from __future__ import annotations

import pytest

from found_rl.sim.carla.connection import CarlaEndpoint, check_versions, endpoint_from_env, town_name
from found_rl.sim.carla.errors import CarlaSetupError


def test_endpoint_from_env():
    assert endpoint_from_env({}) == CarlaEndpoint()
    assert endpoint_from_env({"FOUND_RL_CARLA": "gpu7:2010"}) == CarlaEndpoint("gpu7", 2010, 8010)
    assert endpoint_from_env({"FOUND_RL_CARLA": "carla:2000:8123"}) == CarlaEndpoint("carla", 2000, 8123)


@pytest.mark.parametrize("raw", ["localhost", "host:port", ":2000", "h:2000:0", "h:99999", "a:1:2:3"])
def test_bad_endpoint_is_named(raw):
    expected = rf"\$FOUND_RL_CARLA: expected host:rpc_port\[:traffic_manager_port\], got '{raw}'"
    with pytest.raises(CarlaSetupError, match=expected):
        endpoint_from_env({"FOUND_RL_CARLA": raw})


def test_versions_compare_releases():
    endpoint = CarlaEndpoint()
    check_versions("0.9.15", "0.9.15-dirty", endpoint)  # a locally built 0.9.15 server
    check_versions("0.9.16", "0.9.16", endpoint)
    with pytest.raises(CarlaSetupError, match=r"client 0\.9\.16 does not match server 0\.9\.15 at localhost:2000"):
        check_versions("0.9.16", "0.9.15", endpoint)
    assert town_name("/Game/Carla/Maps/Town10HD_Opt") == "Town10HD_Opt"
