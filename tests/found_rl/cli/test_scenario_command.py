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
        for name in ("quickstart.yaml", "town_grid.yaml", "town_spider.yaml")
    ]
    assert cli.main(["scenario", "check", "--schema-only", *files]) == 0
    assert capsys.readouterr().out.count(": ok") == 3


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
