"""``found-rl scenario check|show|routes`` through the real CLI entry point."""

from pathlib import Path

import pytest

from found_rl import cli
from found_rl.routes import parse_routes

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
TINY = "map:\n  generate: {type: grid, junctions: 2, block_length_m: 70}\nroutes:\n  file: routes.xml\n"


@pytest.fixture(autouse=True)
def only_scenario_command(monkeypatch, tmp_path_factory):
    monkeypatch.setattr(cli, "COMMANDS", {"scenario": cli.COMMANDS["scenario"]})
    monkeypatch.setenv("FOUND_RL_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_check_accepts_the_shipped_scenarios(capsys):
    files = [
        str(SCENARIOS / name)
        for name in ("small_grid.yaml", "small_spider.yaml", "small_random.yaml", "heldout_town.yaml",
                     "town_grid.yaml", "town_spider.yaml", "opendrive_crossroads.yaml", "spider_town.yaml",
                     "random_town.yaml", "ingolstadt.yaml", "braunschweig.yaml")
    ]
    assert cli.main(["scenario", "check", "--schema-only", *files]) == 0
    assert capsys.readouterr().out.count(": ok") == len(files)


def test_check_names_file_and_field(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "map: {generate: {type: grid}}\nroutes: {random_length_m: 100}\ntraffic: {vehicles: -3}\n"
    )
    assert cli.main(["scenario", "check", str(bad)]) == 2
    assert (
        f"{bad}: traffic.vehicles: expected an int >= 0, got -3"
        in capsys.readouterr().err
    )


def test_generated_routes_check_show_and_off_network_waypoints(tmp_path, capsys):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    out = tmp_path / "routes.xml"
    assert (
        cli.main(
            [
                "scenario",
                "routes",
                "--scenario",
                str(scenario),
                "--count",
                "3",
                "--length-m",
                "200",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert len(parse_routes(out)) == 3
    assert cli.main(["scenario", "check", str(scenario)]) == 0
    assert cli.main(["scenario", "show", str(scenario)]) == 0
    shown = capsys.readouterr().out
    assert "routes     3 from" in shown and "lights     4 signalised junctions" in shown
    assert "episode    at most 1000 steps (100 s), blocked after 90 s" in shown

    text = out.read_text()
    first_x = text.split('x="', 1)[1].split('"', 1)[0]
    out.write_text(text.replace(f'x="{first_x}"', 'x="99999.0"', 1))
    assert cli.main(["scenario", "check", str(scenario)]) == 2
    assert "route '0': waypoint 0" in capsys.readouterr().err


def test_route_file_without_routes_is_an_error(tmp_path, capsys):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    (tmp_path / "routes.xml").write_text("<routes></routes>")
    assert cli.main(["scenario", "check", str(scenario)]) == 2
    assert "no <route> elements found" in capsys.readouterr().err


def test_show_states_the_leaderboard_time_limit():
    from found_rl.cli.scenario import _episode_limit
    from found_rl.scenario import parse_scenario

    scenario = parse_scenario(
        {
            "map": {"generate": {"type": "grid"}},
            "routes": {"random_length_m": 100},
            "episode": {"max_steps": 6000, "route_timeout": {"s_per_m": 0.8, "initial_s": 5}},
        }
    )
    assert _episode_limit(scenario) == "0.8 s per route metre + 5 s (leaderboard), at most 6000 steps (600 s)"


def test_check_and_show_say_when_walkers_cannot_spawn_and_lights_are_dropped(tmp_path, capsys):
    from found_rl.maps.sample_opendrive import crossroads_xodr

    (tmp_path / "town.xodr").write_text(crossroads_xodr(sidewalks=False, stray_signal=True))
    scenario = tmp_path / "town.yaml"
    scenario.write_text(
        "map: {file: town.xodr}\nroutes: {random_length_m: 60}\ntraffic: {vehicles: 2, walkers: [10, 20]}\n"
    )
    assert cli.main(["scenario", "check", str(scenario)]) == 0
    captured = capsys.readouterr()
    assert f"{scenario}: ok" in captured.out
    assert (
        f"{scenario}: warning: traffic.walkers: asks for up to 20 walkers, but at most 0 can be spawned "
        "(the map has no sidewalks)" in captured.err
    )
    assert "traffic light 900 on road 9: the road reaches no junction" in captured.err
    assert cli.main(["scenario", "show", str(scenario)]) == 0
    out = capsys.readouterr().out
    assert "walkers 10-20 (the map can host 0)" in out
    assert "1 signalised junctions, 1 map lights not mapped" in out


def test_show_reports_the_walkers_a_map_with_sidewalks_can_host(tmp_path, capsys):
    from found_rl.maps.sample_opendrive import crossroads_xodr

    (tmp_path / "town.xodr").write_text(crossroads_xodr())
    scenario = tmp_path / "town.yaml"
    scenario.write_text("map: {file: town.xodr}\nroutes: {random_length_m: 60}\ntraffic: {walkers: 10}\n")
    assert cli.main(["scenario", "check", str(scenario)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert cli.main(["scenario", "show", str(scenario)]) == 0
    # Eight 60 m sidewalks, one walker per 5 m.
    assert "walkers 10-10 (the map can host 96)" in capsys.readouterr().out


def _crossroads_routes(path: Path) -> None:
    """Two routes on the crossroads (CARLA frame: y = -OpenDRIVE y) and one of another town."""
    import numpy as np

    from found_rl.routes import RouteSpec, write_routes

    write_routes(
        path,
        [
            RouteSpec("0", "crossroads", np.array([[-50.0, 1.75], [50.0, 1.75]])),  # straight on, eastbound
            RouteSpec("1", "crossroads", np.array([[-50.0, 1.75], [1.75, -50.0]])),  # left turn, to the north
            RouteSpec("2", "Town02", np.array([[500.0, 500.0], [600.0, 500.0]])),
        ],
    )


def test_the_shipped_opendrive_crossroads_is_the_sample_town_and_its_twelve_movements():
    import numpy as np

    from found_rl.maps.sample_opendrive import crossroads_routes, crossroads_xodr

    assert (SCENARIOS / "maps" / "crossroads.xodr").read_text() == crossroads_xodr()
    shipped = parse_routes(SCENARIOS / "routes" / "crossroads.xml")
    expected = crossroads_routes()
    assert [(r.route_id, r.town) for r in shipped] == [(r.route_id, r.town) for r in expected]
    np.testing.assert_allclose([r.waypoints_xy for r in shipped], [r.waypoints_xy for r in expected])
    assert expected[2].waypoints_xy.tolist() == [[-50.0, 1.75], [1.75, -50.0]]  # west to north: a left turn


def test_import_town_writes_a_checked_scenario_with_the_town_s_routes(tmp_path, capsys):
    from found_rl.maps.sample_opendrive import crossroads_xodr
    from found_rl.scenario import load_scenario

    (tmp_path / "maps").mkdir()
    (tmp_path / "maps" / "crossroads.xodr").write_text(crossroads_xodr())
    _crossroads_routes(tmp_path / "maps" / "routes_devtest.xml")
    out = tmp_path / "scenarios" / "crossroads.yaml"
    args = ["scenario", "import-town", str(tmp_path / "maps" / "crossroads.xodr"),
            "--routes", str(tmp_path / "maps" / "routes_devtest.xml"), "--walkers", "5,10", "--out", str(out)]
    assert cli.main(args) == 0
    assert f"wrote {out}: 1 signalised junctions, 8 sidewalk lanes, 4 crossings, 2 routes of crossroads" in (
        capsys.readouterr().out
    )
    scenario = load_scenario(out)
    assert scenario.map.file == (tmp_path / "maps" / "crossroads.xodr").resolve()
    assert (scenario.routes.town, scenario.traffic.walkers) == ("crossroads", (5, 10))
    assert "../maps/crossroads.xodr" in out.read_text()  # relative, so the folder can move
    assert cli.main(["scenario", "check", str(out)]) == 0
    # The other town's routes are left out; asking for it by name finds its waypoints off this map.
    assert cli.main([*args[:5], "--town", "Town02", "--out", str(tmp_path / "t2.yaml")]) == 2
    assert "route '2': waypoint 0" in capsys.readouterr().err


def test_import_town_needs_a_town_when_the_routes_hold_several(tmp_path, capsys):
    from found_rl.maps.sample_opendrive import crossroads_xodr

    (tmp_path / "town.xodr").write_text(crossroads_xodr())
    _crossroads_routes(tmp_path / "routes.xml")
    base = ["scenario", "import-town", str(tmp_path / "town.xodr"), "--out", str(tmp_path / "s.yaml")]
    assert cli.main([*base, "--routes", str(tmp_path / "routes.xml")]) == 2
    assert "holds routes of towns ['Town02', 'crossroads']; say which with --town" in capsys.readouterr().err
    assert cli.main([*base, "--routes", str(tmp_path / "routes.xml"), "--town", "Town05"]) == 2
    assert "--town Town05: " in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*base, "--vehicles", "many"])
    assert exit_info.value.code == 2
    assert "argument --vehicles: expected N or MIN,MAX (integers), got 'many'" in capsys.readouterr().err
    assert cli.main(["scenario", "import-town", str(tmp_path / "missing.xodr"), "--out", str(tmp_path / "s.yaml")]) == 2
    assert "missing.xodr: expected an existing OpenDRIVE .xodr file" in capsys.readouterr().err


@pytest.mark.parametrize("town", [None, "crossroads"])
def test_import_town_accepts_routes_without_a_town_and_says_so(tmp_path, capsys, town):
    from found_rl.maps.sample_opendrive import crossroads_xodr
    from found_rl.routes import RouteSpec, write_routes
    from found_rl.scenario import load_scenario

    (tmp_path / "crossroads.xodr").write_text(crossroads_xodr())
    routes = tmp_path / "routes.xml"
    _crossroads_routes(routes)
    write_routes(routes, [RouteSpec(s.route_id, "", s.waypoints_xy) for s in parse_routes(routes)[:2]])
    assert "town=" not in routes.read_text()
    out = tmp_path / "s.yaml"
    args = ["scenario", "import-town", str(tmp_path / "crossroads.xodr"), "--routes", str(routes), "--out", str(out)]
    assert cli.main(args + (["--town", town] if town else [])) == 0
    captured = capsys.readouterr()
    kept = "kept for --town crossroads" if town else "all 2 are used"
    assert f"note: 2 of 2 routes carry no town attribute; {kept}" in captured.err
    assert "2 routes" in captured.out
    assert load_scenario(out).routes.town == town
    assert cli.main(["scenario", "check", str(out)]) == 0


def test_routes_on_a_map_without_lights_fall_back_to_plain_drives_with_a_warning(tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "map:\n  generate: {type: grid, junctions: 2, block_length_m: 70, traffic_lights: false}\n"
        "routes: {random_length_m: 100}\n"
    )
    out = tmp_path / "r.xml"
    base = ["scenario", "routes", "--scenario", str(scenario), "--count", "3", "--length-m", "120", "--out", str(out)]
    assert cli.main(base) == 0
    err = capsys.readouterr().err
    assert "warning: only 0 of 3 routes turn at signalised junctions (the map has 0 traffic lights)" in err
    assert len(parse_routes(out)) == 3
    assert cli.main([*base, "--turns", "any"]) == 0
    assert "warning" not in capsys.readouterr().err and len(parse_routes(out)) == 3
