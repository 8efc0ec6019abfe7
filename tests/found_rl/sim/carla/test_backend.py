"""The CARLA backend against the scripted ``carla`` stand-in (recorded GridTown geometry)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA

from fast_sampler import InProcessExecutor
from found_rl.actions import Controls, RoadOption
from found_rl.env import DrivingEnv
from found_rl.infractions import drivable_area
from found_rl.scenario import load_scenario
from found_rl.sim.backend import Backend
from found_rl.sim.carla.backend import CarlaBackend
from found_rl.sim.carla.errors import CarlaServerLost, CarlaSetupError
from found_rl.world import LightState, WorldSnapshot

SCENARIO = DATA / "grid_town.yaml"


def make(carla, endpoint, scenario=SCENARIO, **kwargs) -> CarlaBackend:
    scenario = scenario if not isinstance(scenario, type(SCENARIO)) else load_scenario(scenario)
    return CarlaBackend(scenario, endpoint=endpoint, carla_module=carla, **kwargs)


def write_scenario(tmp_path, body: str):
    (tmp_path / "routes.xml").write_text((DATA / "grid_town_routes.xml").read_text())
    path = tmp_path / "s.yaml"
    path.write_text(body)
    return path


def test_reset_fills_the_snapshot_contract(carla, endpoint, server):
    backend = make(carla, endpoint)
    assert isinstance(backend, Backend)
    snapshot = backend.reset(seed=3, route_index=0)
    assert isinstance(snapshot, WorldSnapshot)
    assert snapshot.step == 0 and snapshot.time_s == 0.0
    np.testing.assert_allclose(snapshot.ego.xy, [5.0, -38.4], atol=1e-6)  # the route start
    np.testing.assert_allclose(snapshot.ego.half_extent, [2.45, 1.06])
    assert snapshot.ego.lane_id == "138_0_-1"
    assert snapshot.route.route_id == "straight" and snapshot.map is backend.map
    # 16 lanes enter the four junctions, one light each; the stand-in cycles N-S against E-W.
    lights = snapshot.traffic_lights
    assert len(lights) == 16 and set(lights.lane_ids) <= set(backend.map.lanes)
    assert set(lights.states.tolist()) == {int(LightState.GREEN), int(LightState.RED)}
    green = lights.states == LightState.GREEN
    np.testing.assert_allclose(lights.remaining_s[green], 10.0 - server.time_s)  # green lasts 10 s
    np.testing.assert_allclose(lights.phase_s[green], 10.0)
    assert np.isinf(lights.remaining_s[~green]).all()  # a red light's wait is not known
    # Each stop line spans its lane (3.2 m) across the lane's direction.
    widths = np.linalg.norm(lights.segments[:, 1] - lights.segments[:, 0], axis=1)
    np.testing.assert_allclose(widths, 3.2, atol=1e-6)
    for box in (snapshot.vehicles, snapshot.walkers):
        assert box.xy.shape == (len(box), 2) and box.velocity_xy.shape == (len(box), 2)
        assert np.all(np.hypot(*(box.xy - snapshot.ego.xy).T) <= 50.0)  # observe_radius_m


def test_routes_are_planned_with_carla_commands(carla, endpoint):
    backend = make(carla, endpoint)
    straight, turn = (backend.reset(seed=0, route_index=i).route for i in range(2))
    assert straight.length_m == pytest.approx(70.0, abs=0.01)
    assert set(straight.commands.tolist()) == {RoadOption.STRAIGHT, RoadOption.LANEFOLLOW}
    # East then south (y grows southward): clockwise seen from above, a right turn in CARLA.
    assert RoadOption.RIGHT in turn.commands.tolist() and RoadOption.LEFT not in turn.commands.tolist()
    spacing = np.linalg.norm(np.diff(turn.xy, axis=0), axis=1)
    assert spacing.max() <= 1.0 + 1e-6
    area = drivable_area(backend.map)
    for route in (straight, turn):
        assert area.outside_distance_m(route.xy).max() == 0.0  # every waypoint is on the road


def test_routes_announce_manoeuvres_as_far_ahead_as_the_scenario_says(carla, endpoint, tmp_path):
    body = "backend: carla\nmap: {town: GridTown}\nroutes: {file: routes.xml, command_lookahead_m: 35, "
    path = write_scenario(tmp_path, body + "command_lookahead_s: 1.5}\n")
    route = make(carla, endpoint, load_scenario(path)).reset(seed=0, route_index=1).route
    assert (route.command_lookahead_m, route.command_lookahead_s) == (35.0, 1.5)


def test_drivingenv_runs_unchanged_on_carla(carla, endpoint):
    env = DrivingEnv(load_scenario(SCENARIO), backend=make(carla, endpoint))
    obs, info = env.reset(seed=0, options={"route_index": 0})
    assert obs["bev"].shape == env.observation_space["bev"].shape and obs["bev"][0].any()  # road drawn
    rewards = []
    for _ in range(30):
        obs, reward, terminated, _, info = env.step(np.array([0.6, 0.0], np.float32))
        rewards.append(reward)
        assert not terminated, info["infractions"]
    assert info["route_completion"] > 0.05 and info["speed_mps"] > 1.0
    assert np.isfinite(rewards).all()
    env.close()


def test_resets_and_close_destroy_every_spawned_actor_and_restore_settings(carla, endpoint, server):
    before = dict(server.actors)  # the town's own actors (traffic lights)
    backend = make(carla, endpoint)
    assert server.settings.synchronous_mode and server.settings.fixed_delta_seconds == pytest.approx(0.1)
    assert carla.SERVERS[2000].traffic_managers[8000]._synchronous
    backend.reset(seed=1, route_index=0)
    first = set(server.actors) - set(before)
    assert len(first) >= 1 + 2 + 3 + 2 * 2  # ego, sensors, >= 3 vehicles, >= 2 walkers + controllers
    backend.reset(seed=2, route_index=1)
    assert first.isdisjoint(server.actors) and first <= set(server.destroyed)
    backend.close()
    assert server.actors.keys() == before.keys()
    assert not server.settings.synchronous_mode and server.settings.fixed_delta_seconds is None
    assert not carla.SERVERS[2000].traffic_managers[8000]._synchronous


def test_same_seed_gives_the_same_first_snapshot(carla, endpoint):
    backend = make(carla, endpoint)
    a = backend.reset(seed=7)
    b = backend.reset(seed=7)
    assert a.route.route_id == b.route.route_id
    np.testing.assert_allclose(a.vehicles.xy, b.vehicles.xy)
    np.testing.assert_allclose(a.walkers.xy, b.walkers.xy)
    c = backend.reset(seed=8)
    assert len(c.vehicles) != len(a.vehicles) or not np.allclose(c.vehicles.xy, a.vehicles.xy)


def test_blocked_spawn_moves_the_ego_along_its_route(carla, endpoint, server):
    backend = make(carla, endpoint)
    blocker = server.spawn(carla.Client("localhost", 2000).get_world().get_blueprint_library().find(
        "vehicle.audi.a2"), carla.Transform(carla.Location(5.0, -38.4, 0.5)))
    snapshot = backend.reset(seed=0, route_index=0)
    assert snapshot.ego.xy[0] >= 5.0 + 2.5  # moved 2 m at a time until clear of the blocker
    assert blocker.id in server.actors  # not ours: never destroyed
    backend.close()
    assert blocker.id in server.actors


def test_collision_sensor_reports_what_geometry_sees(carla, endpoint, server):
    backend = make(carla, endpoint)
    backend.reset(seed=0, route_index=0)
    bp = carla.Client("localhost", 2000).get_world().get_blueprint_library().find("vehicle.audi.a2")
    parked = server.spawn(bp, carla.Transform(carla.Location(12.0, -38.4, 0.5)))
    hits = []
    for _ in range(40):
        snapshot = backend.step(Controls(0.6, 0.0, 0.0))
        hits += snapshot.ego_collided_with
        if hits:
            break
    assert str(parked.id) in hits
    gap = np.hypot(*(snapshot.ego.xy - [12.0, -38.4]))
    assert gap < snapshot.ego.half_extent[0] + 2.45  # the boxes overlap along the lane


def test_a_hung_server_without_supervisor_is_a_lost_env(carla, endpoint, server):
    backend = make(carla, endpoint)
    backend.reset(seed=0, route_index=0)
    server.hang_after_ticks = 2
    backend.step(Controls(0.0, 0.0, 0.0))
    backend.step(Controls(0.0, 0.0, 0.0))
    with pytest.raises(CarlaServerLost, match=r"localhost:2000 did not answer a tick .*not supervised"):
        backend.step(Controls(0.0, 0.0, 0.0))
    with pytest.raises(RuntimeError, match="call reset"):
        backend.step(Controls(0.0, 0.0, 0.0))


class RevivingServer:
    """A supervised-server stand-in: restart() brings a fresh fake server up on the port."""

    def __init__(self, carla, endpoint) -> None:
        self.carla, self.endpoint, self.restarts = carla, endpoint, 0

    def restart(self) -> None:
        import fake_carla

        self.restarts += 1
        self.carla.SERVERS[self.endpoint.port] = fake_carla.FakeServer(
            {"GridTown": fake_carla.load_town()}, town="GridTown"
        )


def test_a_dead_supervised_server_is_restarted_and_the_clip_marked_lost(carla, endpoint, server):
    supervised = RevivingServer(carla, endpoint)
    scenario = load_scenario(SCENARIO)
    executor = InProcessExecutor([lambda: DrivingEnv(scenario, observation="state", backend=CarlaBackend(
        scenario, server=supervised, carla_module=carla))])
    executor.reset({0: 0})
    server.die_after_ticks = 1
    first = executor.step({0: np.zeros(2, np.float32)})[0]
    assert not first.worker_died
    lost = executor.step({0: np.zeros(2, np.float32)})[0]
    assert lost.worker_died and lost.truncated and "restarted it" in lost.info["worker_died"]
    assert supervised.restarts == 1
    fresh = carla.SERVERS[2000]
    assert fresh is not server and fresh.settings.synchronous_mode  # the world was rebuilt
    executor.reset({0: 1})  # the clip resumes on the new server
    assert not executor.step({0: np.zeros(2, np.float32)})[0].worker_died
    executor.close()


# ------------------------------------------------------------------------------ bad input
def test_no_server_on_the_port_names_the_command_that_starts_one(carla):
    from found_rl.sim.carla.connection import CarlaEndpoint

    with pytest.raises(CarlaSetupError) as error:
        make(carla, CarlaEndpoint(port=2010, timeout_s=0.01, retries=2))
    message = str(error.value)
    assert "no CARLA server answered at localhost:2010 (2 tries" in message
    assert "CarlaUE4.sh -RenderOffScreen -carla-rpc-port=2010" in message and "found-rl carla up" in message


@pytest.mark.parametrize(
    ("server_version", "expected"),
    [
        ("0.9.15", r"CARLA client 0\.9\.16 does not match server 0\.9\.15 .*pip install carla==0\.9\.15"),
        ("0.9.14", r"runs 0\.9\.14; found-rl supports servers 0\.9\.15, 0\.9\.16"),
    ],
)
def test_version_mismatch_names_both_versions(carla, endpoint, server, server_version, expected):
    server.version = server_version
    with pytest.raises(CarlaSetupError, match=expected):
        make(carla, endpoint)


def test_unknown_town_lists_the_available_ones(carla, endpoint, tmp_path):
    path = write_scenario(tmp_path, "backend: carla\nmap: {town: Town99}\nroutes: {random_length_m: 50}\n")
    with pytest.raises(CarlaSetupError, match=r"map\.town: unknown town 'Town99'; the server at localhost:2000 has: "
                                              r"GridTown"):
        make(carla, endpoint, load_scenario(path))


def test_off_map_waypoint_names_route_and_index(carla, endpoint, server, tmp_path):
    (tmp_path / "routes.xml").write_text(
        '<routes><route id="far" town="GridTown"><waypoints><position x="5" y="-38.4" z="0"/>'
        '<position x="70" y="-38.4" z="0"/><position x="500" y="500" z="0"/></waypoints></route></routes>'
    )
    path = tmp_path / "s.yaml"
    path.write_text("backend: carla\nmap: {town: GridTown}\nroutes: {file: routes.xml}\n")
    with pytest.raises(CarlaSetupError, match=r"routes\.xml: route 'far': waypoint 2 at \(500\.0, 500\.0\) is off"):
        make(carla, endpoint, load_scenario(path))
    assert not server.settings.synchronous_mode  # the server is not left waiting for ticks


def test_route_for_another_town_is_named(carla, endpoint, tmp_path):
    path = write_scenario(tmp_path, "backend: carla\nmap: {town: GridTown}\nroutes: {file: routes.xml}\n")
    (tmp_path / "routes.xml").write_text(
        (DATA / "grid_town_routes.xml").read_text().replace('id="turn" town="GridTown"', 'id="turn" town="Town02"')
    )
    with pytest.raises(CarlaSetupError, match=r"route 'turn' is for town Town02, map\.town is GridTown"):
        make(carla, endpoint, load_scenario(path))


def test_missing_client_says_how_to_install(monkeypatch):
    import builtins

    from found_rl.sim.carla.connection import import_carla

    real_import = builtins.__import__

    def no_carla(name, *args, **kwargs):
        if name == "carla":
            raise ModuleNotFoundError("No module named 'carla'", name="carla")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_carla)
    with pytest.raises(CarlaSetupError, match=r"pip install 'found-rl\[carla\]'"):
        import_carla()


@pytest.mark.slow
def test_the_same_scenario_file_runs_on_sumo_and_carla_changing_only_backend(carla, endpoint, tmp_path):
    """One OpenDRIVE map and route file: SUMO (via netconvert) and CARLA plan the same routes."""
    from found_rl.sim.sumo.backend import SumoBackend

    for name in ("grid_town.xodr", "grid_town_routes.xml"):
        (tmp_path / name).write_text((DATA / name).read_text())
    body = "map: {file: grid_town.xodr}\nroutes: {file: grid_town_routes.xml}\ntraffic: {vehicles: 2, warmup_s: 5}\n"
    scenarios = {}
    for backend in ("sumo", "carla"):
        (tmp_path / f"{backend}.yaml").write_text(f"backend: {backend}\n{body}")
        scenarios[backend] = load_scenario(tmp_path / f"{backend}.yaml")
    on_sumo = SumoBackend(scenarios["sumo"])
    on_carla = make(carla, endpoint, scenarios["carla"])
    try:
        for index in range(2):
            a = on_sumo.reset(seed=0, route_index=index).route
            b = on_carla.reset(seed=0, route_index=index).route
            assert a.route_id == b.route_id
            assert a.length_m == pytest.approx(b.length_m, abs=0.5)
            assert set(a.commands.tolist()) == set(b.commands.tolist())
            np.testing.assert_allclose(a.xy[[0, -1]], b.xy[[0, -1]], atol=0.2)
            # The middle of each route agrees too: both read the same map in the same frame.
            np.testing.assert_allclose(a.xy[len(a.xy) // 2], b.xy[len(b.xy) // 2], atol=1.0)
    finally:
        on_sumo.close()
        on_carla.close()


def test_stop_signs_become_stop_lines_on_their_lane(carla, endpoint):
    import fake_carla

    carla.SERVERS[2000] = fake_carla.FakeServer(
        {"GridTown": fake_carla.load_town()}, town="GridTown", stop_sign_lanes=("138_0_-1",)
    )
    snapshot = make(carla, endpoint).reset(seed=0, route_index=0)
    signs = snapshot.stop_signs
    assert len(signs) == 1 and signs.lane_ids == ("138_0_-1",) and signs.states.tolist() == [LightState.RED]
    (ax, ay), (bx, by) = signs.segments[0]
    assert ax == pytest.approx(bx, abs=1e-6) and abs(ay - by) == pytest.approx(3.2)  # across the eastbound lane
    assert 27.0 < ax < 30.8 and min(ay, by) < -38.4 < max(ay, by)  # under the trigger volume, on the lane


def test_lane_invasion_sensor_reports_leaving_the_lane(carla, endpoint):
    backend = make(carla, endpoint)
    backend.reset(seed=0, route_index=0)
    crossed = []
    for _ in range(40):
        backend.step(Controls(0.5, 0.4, 0.0))  # steer right, off the lane
        crossed += backend.lane_invasions
    assert crossed == ["Solid"]  # once per departure


def test_a_supervised_server_lost_between_episodes_costs_no_episode(carla, endpoint, server):
    supervised = RevivingServer(carla, endpoint)
    backend = CarlaBackend(load_scenario(SCENARIO), server=supervised, carla_module=carla)
    backend.reset(seed=0, route_index=0)
    server.is_dead = True  # dies while the agent was busy elsewhere
    snapshot = backend.reset(seed=1, route_index=1)
    assert supervised.restarts == 1 and snapshot.route.route_id == "turn"
    assert carla.SERVERS[2000] is not server and backend.step(Controls(0.5, 0.0, 0.0)).step == 1


def test_an_unsupervised_server_lost_between_episodes_is_named_at_reset(carla, endpoint, server):
    backend = make(carla, endpoint)
    backend.reset(seed=0, route_index=0)
    server.is_dead = True
    with pytest.raises(CarlaServerLost, match=r"CARLA server at localhost:2000 failed during reset"):
        backend.reset(seed=1, route_index=1)


@pytest.mark.parametrize(("load_s", "loads"), [(30.0, True), (1000.0, False)])
def test_loading_a_town_waits_for_the_longer_map_load_timeout(carla, endpoint, server, tmp_path, load_s, loads):
    """A town load outlasts the 0.01 s answer timeout here; only the map-load timeout bounds it."""
    server.towns["SecondTown"] = server.towns["GridTown"]
    server.load_s = load_s
    path = write_scenario(tmp_path, "backend: carla\nmap: {town: SecondTown}\nroutes: {random_length_m: 50}\n")
    if loads:
        backend = make(carla, endpoint, load_scenario(path))
        assert backend._client._timeout == endpoint.timeout_s  # back to the answer timeout after loading
        backend.close()
    else:
        with pytest.raises(CarlaSetupError, match=r"did not finish loading SecondTown within 300 s \(time-out of"):
            make(carla, endpoint, load_scenario(path))
    assert server.load_timeouts == [endpoint.load_timeout_s] == [300.0]
