"""Fixtures for the CARLA backend: the scripted ``carla`` stand-in with one server on a port."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import fake_carla

DATA = Path(__file__).parent / "data"
PORT = 2000


@pytest.fixture
def carla():
    """The stand-in module with a 0.9.16 server on localhost:2000 holding GridTown."""
    module = fake_carla.load_fake_carla()
    module.SERVERS[PORT] = fake_carla.FakeServer({"GridTown": fake_carla.load_town()}, town="GridTown")
    return module


@pytest.fixture
def server(carla):
    return carla.SERVERS[PORT]


@pytest.fixture
def endpoint():
    from found_rl.sim.carla.connection import CarlaEndpoint

    return CarlaEndpoint(port=PORT, timeout_s=0.01, retries=2, probe_tcp=False)  # the stand-in has no socket
