"""Checks against the real ``carla`` client, where it is installed (no server needed).

``carla.Map(name, xodr)`` parses OpenDRIVE in the client, so the town geometry and route
planning run on libcarla itself; the stand-in's API surface is checked against the real one.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA

carla = pytest.importorskip("carla")

import fake_carla  # noqa: E402

from found_rl.routes.town_planner import TownRoutePlanner  # noqa: E402
from found_rl.sim.carla.connection import SUPPORTED_SERVER_VERSIONS, CarlaEndpoint, connect  # noqa: E402
from found_rl.sim.carla.errors import CarlaSetupError  # noqa: E402
from found_rl.sim.carla.town_geometry import extract_town_geometry  # noqa: E402

STAND_INS = {
    "Client": "Client", "World": "World", "Map": "Map", "Waypoint": "Waypoint", "TrafficLight": "TrafficLight",
    "TrafficManager": "TrafficManager", "WalkerAIController": "WalkerAIController", "Sensor": "Sensor",
    "Vehicle": "Vehicle", "Walker": "Walker", "Actor": "Actor", "WorldSettings": "WorldSettings",
    "ActorBlueprint": "ActorBlueprint", "BlueprintLibrary": "BlueprintLibrary", "ActorList": "ActorList",
    "Vector3D": "Vector3D", "Location": "Location", "Rotation": "Rotation", "Transform": "Transform",
    "BoundingBox": "BoundingBox", "VehicleControl": "VehicleControl",
    "OpendriveGenerationParameters": "OpendriveGenerationParameters",
}  # fmt: skip
TEST_ONLY = {"copy", "GREEN_S", "YELLOW_S"}  # the stand-in's own test helpers


def _stubs() -> dict[str, ast.ClassDef]:
    """The classes of the real client's type stubs (``carla/libcarla.pyi``), by name."""
    tree = ast.parse((Path(carla.__file__).parent / "libcarla.pyi").read_text(encoding="utf-8"))
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _instance_attributes(cls: type) -> set[str]:
    """Public attributes the stand-in's ``__init__`` sets (``self.name = ...``)."""
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    if "__init__" not in vars(cls):
        return set()
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
    return {
        target.attr
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        for target in (target.elts if isinstance(target, ast.Tuple) else [target])
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
        and not target.attr.startswith("_")
    }  # fmt: skip


def _stub_methods(stub: ast.ClassDef, stubs: dict[str, ast.ClassDef]) -> dict[str, ast.FunctionDef]:
    """Methods of a stub class and its stub bases (the last overload of a name wins)."""
    methods: dict[str, ast.FunctionDef] = {}
    for base in stub.bases:
        if isinstance(base, ast.Name) and base.id in stubs:
            methods.update(_stub_methods(stubs[base.id], stubs))
    methods.update({n.name: n for n in stub.body if isinstance(n, ast.FunctionDef)})
    return methods


@pytest.mark.parametrize("name", sorted(STAND_INS))
def test_the_stand_in_matches_the_real_client_in_names_bases_and_signatures(name):
    real, fake = getattr(carla, name), getattr(fake_carla, STAND_INS[name])
    public = {n for n in vars(fake) if not n.startswith("_")} | _instance_attributes(fake)
    missing = sorted(n for n in public - TEST_ONLY if not hasattr(real, n))
    assert not missing, f"{name}: {missing} are not in carla.{name}"
    real_bases = {c.__name__ for c in real.__mro__}
    fake_bases = {c.__name__ for c in fake.__mro__[1:] if c.__name__ in STAND_INS}
    assert fake_bases <= real_bases, f"{name}: the stand-in derives from {fake_bases}, carla.{name} from {real_bases}"
    stubs = _stubs()
    methods = _stub_methods(stubs[name], stubs) if name in stubs else {}
    for attr in sorted(public - TEST_ONLY):
        ours = inspect.getattr_static(fake, attr, None)
        if isinstance(inspect.getattr_static(real, attr, None), property):
            assert not inspect.isfunction(ours), f"{name}.{attr} is a property in the real client, a method here"
            continue
        assert inspect.isfunction(ours), f"{name}.{attr} is a method in the real client, not here"
        theirs = methods.get(attr)
        if theirs is None:
            continue
        parameters = [
            p for p in inspect.signature(ours).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]  # fmt: skip
        real_names = [a.arg for a in theirs.args.args if a.arg != "self"] + [a.arg for a in theirs.args.kwonlyargs]
        ours_names = [p.name for p in parameters]
        assert ours_names == real_names[: len(ours_names)], (
            f"{name}.{attr}{tuple(ours_names)}: the real client's parameters are {tuple(real_names)}"
        )


def test_the_command_batch_names_exist():
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
