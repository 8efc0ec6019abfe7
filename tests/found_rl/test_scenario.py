"""Scenario YAML validation: valid files load; every mistake names the file and field."""

from pathlib import Path

import pytest

from found_rl.errors import UserError
from found_rl.scenario import load_scenario, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
VALID = """
map:
  generate: {type: grid, junctions: 3}
routes:
  random_length_m: 200
traffic: {vehicles: [5, 10], walkers: 3}
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "name",
    ["small_grid.yaml", "small_spider.yaml", "small_random.yaml", "heldout_town.yaml", "town_grid.yaml",
     "town_spider.yaml", "spider_town.yaml", "random_town.yaml", "ingolstadt.yaml", "braunschweig.yaml"],
)
def test_shipped_scenarios_are_valid(name):
    scenario = load_scenario(SCENARIOS / name)
    assert scenario.backend == "sumo"
    assert scenario.source_path == (SCENARIOS / name).resolve()


def test_counts_become_ranges_and_defaults_fill_in(tmp_path):
    scenario = load_scenario(write(tmp_path, VALID))
    assert scenario.traffic.vehicles == (5, 10)
    assert scenario.traffic.walkers == (3, 3)
    assert scenario.map.generate.junctions == 3
    assert scenario.reward == "valeo" and scenario.episode.max_steps == 1000


def test_relative_route_file_resolves_against_the_scenario_folder(tmp_path):
    (tmp_path / "routes").mkdir()
    (tmp_path / "routes" / "r.xml").write_text("<routes/>")
    text = "map: {generate: {type: spider}}\nroutes: {file: routes/r.xml}\n"
    scenario = load_scenario(write(tmp_path, text))
    assert scenario.routes.file == (tmp_path / "routes" / "r.xml").resolve()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            VALID.replace("walkers: 3", "walkers: 3, vehicels: 4"),
            "s.yaml: traffic.vehicels: unknown field",
        ),
        (
            VALID.replace("vehicles: [5, 10]", "vehicles: -3"),
            "s.yaml: traffic.vehicles: expected an int >= 0, got -3",
        ),
        (
            VALID.replace("vehicles: [5, 10]", "vehicles: [10, 5]"),
            "traffic.vehicles: expected a [min, max] pair",
        ),
        (
            VALID.replace("junctions: 3", "junctions: 1"),
            "map.generate.junctions: input should be greater than or equal to 2, got 1",
        ),
        (VALID.replace("type: grid", "type: hexagon"), "map.generate"),
        (
            VALID + "reward: shaped\n",
            "reward: input should be 'valeo' or 'carl', got 'shaped'",
        ),
        (VALID + "backend: gazebo\n", "backend:"),
        ("routes: {random_length_m: 100}\n", "s.yaml: map: required field is missing"),
        (VALID.replace("random_length_m: 200", "{}"), "routes"),
        (VALID + "source_path: /x\n", "source_path: unknown field"),
        (
            VALID + "episode: {route_timeout: {s_per_m: 0}}\n",
            "episode.route_timeout.s_per_m: input should be greater than 0, got 0",
        ),
        (VALID + "episode: {route_timeout: {seconds: 9}}\n", "episode.route_timeout.seconds: unknown field"),
    ],
)
def test_bad_fields_name_file_and_field(tmp_path, text, expected):
    with pytest.raises(ValueError) as error:
        load_scenario(write(tmp_path, text))
    assert expected in str(error.value)
    assert str(tmp_path / "s.yaml") in str(error.value)


def test_map_needs_exactly_one_source(tmp_path):
    (tmp_path / "n.net.xml").write_text("<net/>")
    text = VALID.replace(
        "generate: {type: grid, junctions: 3}",
        "generate: {type: grid}\n  file: n.net.xml",
    )
    with pytest.raises(
        ValueError, match="map: give exactly one of generate, file, town"
    ):
        load_scenario(write(tmp_path, text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "map: {file: missing.net.xml}\nroutes: {random_length_m: 100}\n",
            "map.file: map file not found",
        ),
        (
            "map: {generate: {type: grid}}\nroutes: {file: nowhere.xml}\n",
            "routes.file: route file not found",
        ),
        (
            "map: {file: town.osm}\nroutes: {random_length_m: 100}\n",
            "map.file: expected a .net.xml, .net.xml.gz or .xodr file",
        ),
        (
            "map: {file: package://sumo/tools/game/no_such.net.xml}\nroutes: {random_length_m: 100}\n",
            r"s.yaml: map.file: package://sumo/tools/game/no_such.net.xml: the installed package sumo "
            r"\(eclipse-sumo [^)]+\) at .* has no file tools/game/no_such.net.xml",
        ),
        (
            "map: {file: package://no_such_package/town.net.xml}\nroutes: {random_length_m: 100}\n",
            "map.file: package://no_such_package/town.net.xml: no installed Python package 'no_such_package'",
        ),
        (
            "map: {file: package://sumo}\nroutes: {random_length_m: 100}\n",
            "map.file: 'package://sumo': expected package://PACKAGE/PATH",
        ),
    ],
)
def test_missing_or_wrong_files_are_named(tmp_path, text, expected):
    with pytest.raises(ValueError, match=expected):
        load_scenario(write(tmp_path, text))


def test_a_package_file_resolves_inside_the_installed_package(tmp_path):
    import sumo

    text = "map: {file: package://sumo/tools/game/fkk_in/ingolstadt.net.xml.gz}\nroutes: {random_length_m: 100}\n"
    scenario = load_scenario(write(tmp_path, text))
    assert scenario.map.file == (Path(sumo.__file__).parent / "tools/game/fkk_in/ingolstadt.net.xml.gz").resolve()


def test_malformed_yaml_names_the_file_and_line_in_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"s\.yaml: malformed YAML: line 2, column 1: ") as error:
        load_scenario(write(tmp_path, "map: {generate: [unclosed\n"))
    assert "\n" not in str(error.value)


def test_a_folder_is_not_a_scenario_file(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path}: is a folder"):
        load_scenario(tmp_path)


def test_binary_scenario_file_is_named(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_bytes(b"\xff\xfe\x00map")
    with pytest.raises(ValueError, match=r"s\.yaml: not a UTF-8 text file"):
        load_scenario(path)


def test_a_folder_as_route_file_is_named_once(tmp_path):
    (tmp_path / "routes.xml").mkdir()
    with pytest.raises(ValueError, match=r"routes\.file: route file is a folder, not a file: ") as error:
        load_scenario(write(tmp_path, "map: {generate: {type: grid}}\nroutes: {file: routes.xml}\n"))
    assert str(error.value).count("routes.xml") == 1


def test_non_mapping_yaml_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="expected a mapping"):
        load_scenario(write(tmp_path, "- just\n- a list\n"))


def test_missing_scenario_file():
    with pytest.raises(FileNotFoundError, match="scenario file not found"):
        load_scenario("no/such/scenario.yaml")


def test_backend_and_map_kind_must_agree():
    with pytest.raises(ValueError, match=r"map\.town names a CARLA town"):
        parse_scenario({"map": {"town": "Town01"}, "routes": {"random_length_m": 100}})
    carla = parse_scenario(
        {
            "backend": "carla",
            "map": {"town": "Town01"},
            "routes": {"random_length_m": 100},
        }
    )
    assert carla.map.town == "Town01"


def test_a_run_config_passed_as_a_scenario_is_named_with_its_scenarios():
    with pytest.raises(UserError) as error:
        load_scenario(SCENARIOS / "quickstart.yaml")
    message, quickstart = str(error.value), SCENARIOS / "quickstart.yaml"
    assert message.startswith(f"{quickstart}: is a run config (for `found-rl train`), not a scenario")
    named = ", ".join(str(SCENARIOS / name) for name in ("small_grid.yaml", "small_spider.yaml", "small_random.yaml"))
    assert f"its scenarios are {named}; pass one of them" in message
    assert "unknown field" not in message and "\n" not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("scenario: town.yaml\nalgorithm: ppo\n", "its scenario is <dir>/town.yaml; pass that"),
        ("algorithm: sac\nbudget: {env_steps: 10}\n", "it names no scenario"),
    ],
)
def test_any_run_config_shape_is_recognised(tmp_path, text, expected):
    with pytest.raises(UserError, match="is a run config") as error:
        load_scenario(write(tmp_path, text))
    assert expected.replace("<dir>", str(tmp_path)) in str(error.value)


def test_a_scenario_with_a_run_config_field_is_still_a_scenario_with_that_field_named(tmp_path):
    with pytest.raises(UserError, match="algorithm: unknown field"):
        load_scenario(write(tmp_path, "map: {generate: {type: grid}}\nalgorithm: sac\n"))
