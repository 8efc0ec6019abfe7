"""A town's identity is its roads: the same network under two specs is one town, two networks are two."""

import gzip
import shutil
from pathlib import Path

import pytest

from found_rl.maps import build_network, network_hash, network_identity, scenario_network
from found_rl.maps.identity import PREFIX, comparable, is_current
from found_rl.scenario import GridNetwork, MapConfig, parse_scenario

CROSSROADS = Path(__file__).resolve().parents[3] / "scenarios" / "maps" / "crossroads.xodr"


def grid(junctions: int) -> Path:
    return build_network(MapConfig(generate=GridNetwork(type="grid", junctions=junctions, block_length_m=40,
                                                        attach_length_m=0)))


def test_an_opendrive_map_under_other_netconvert_options_is_the_same_town():
    plain = build_network(MapConfig(file=CROSSROADS))
    slower_lights = build_network(MapConfig(file=CROSSROADS, netconvert_options=("--tls.green.time=20",)))
    assert network_hash(plain) != network_hash(slower_lights)  # the files differ (header, signal plan) ...
    assert network_identity(plain) == network_identity(slower_lights)  # ... the roads do not


def test_a_copied_network_with_another_header_and_compression_is_the_same_town(tmp_path):
    built = grid(2)
    text = built.read_text()
    copy = tmp_path / "renamed.net.xml"
    copy.write_text(text.replace("<net ", "<!-- written elsewhere, with other options -->\n<net ", 1))
    packed = tmp_path / "packed.net.xml.gz"
    with open(built, "rb") as source, gzip.open(packed, "wb") as target:
        shutil.copyfileobj(source, target)
    generated = parse_scenario({"map": {"generate": {"type": "grid", "junctions": 2, "block_length_m": 40,
                                                     "attach_length_m": 0}}, "routes": {"random_length_m": 50}})
    as_file = parse_scenario({"map": {"file": str(copy)}, "routes": {"random_length_m": 50}})
    assert scenario_network(generated) == scenario_network(as_file) == network_identity(packed)


def test_two_different_networks_are_two_towns():
    assert network_identity(grid(2)) != network_identity(grid(3))


def test_an_identity_names_its_definition_and_an_older_one_is_never_compared():
    identity = network_identity(grid(2))
    assert identity.startswith(PREFIX) and is_current(identity)
    legacy = network_hash(grid(2))  # what datasets recorded before: the file's bytes, 20 hex digits
    assert not is_current(legacy)
    assert not comparable(identity, legacy) and comparable(legacy, legacy) and comparable(identity, "carla-town:Town01")


def test_a_carla_town_named_without_its_map_file_is_known_by_name():
    scenario = parse_scenario({"backend": "carla", "map": {"town": "Town01"}, "routes": {"random_length_m": 50}})
    assert scenario_network(scenario) == "carla-town:Town01"


def test_a_file_that_is_not_a_network_is_named(tmp_path):
    bad = tmp_path / "broken.net.xml"
    bad.write_text("<net><edge id='a'")
    with pytest.raises(ValueError, match=r"broken\.net\.xml: not a SUMO network"):
        network_identity(bad)
