"""Compiling networks: netgenerate specs, OpenDRIVE via netconvert, the content-hash cache."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from found_rl.maps import build_network, read_network
from found_rl.scenario import parse_scenario

GRID = {"type": "grid", "junctions": 2, "block_length_m": 60}


def map_config(tmp_path=None, **map_fields):
    return parse_scenario(
        {"map": map_fields, "routes": {"random_length_m": 50}}, base_dir=tmp_path
    ).map


def test_generated_network_is_cached_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUND_RL_CACHE", str(tmp_path / "cache"))
    first = build_network(map_config(generate=GRID))
    assert first.is_file() and first.is_relative_to(tmp_path / "cache")
    mtime = first.stat().st_mtime_ns
    assert build_network(map_config(generate=GRID)) == first
    assert first.stat().st_mtime_ns == mtime
    assert build_network(map_config(generate={**GRID, "lanes": 2})) != first


@pytest.mark.parametrize(
    ("spec", "has_lights", "has_crossings"),
    [
        (GRID, True, True),
        ({**GRID, "traffic_lights": False, "sidewalks": False}, False, False),
        ({"type": "spider", "arms": 4, "circles": 1, "ring_spacing_m": 60}, True, True),
        ({"type": "random", "iterations": 10, "seed": 3}, None, None),
    ],
)
def test_generated_networks_have_what_the_spec_asks_for(
    spec, has_lights, has_crossings
):
    net = read_network(build_network(map_config(generate=spec)))
    assert any(
        lane.allows("passenger") for edge in net.getEdges() for lane in edge.getLanes()
    )
    if has_lights is not None:
        assert bool(net.getTrafficLights()) == has_lights
        assert (
            any(edge.getFunction() == "crossing" for edge in net.getEdges())
            == has_crossings
        )


def test_concurrent_builders_agree_and_leave_no_temporary_folders(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("FOUND_RL_CACHE", str(tmp_path / "cache"))
    config = map_config(generate={**GRID, "block_length_m": 75})
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda _: build_network(config), range(4)))
    assert len(set(paths)) == 1
    read_network(paths[0])  # complete, parseable XML
    leftovers = [
        p.name
        for p in (tmp_path / "cache" / "networks").iterdir()
        if p.name.startswith(".")
    ]
    assert leftovers == []


def test_a_net_xml_file_is_used_as_is(tmp_path):
    net_path = build_network(map_config(generate=GRID))
    copy = tmp_path / "town.net.xml"
    copy.write_bytes(net_path.read_bytes())
    assert build_network(map_config(tmp_path, file="town.net.xml")) == copy.resolve()


def test_netconvert_failure_shows_its_message(tmp_path):
    (tmp_path / "broken.xodr").write_text("<OpenDRIVE><header></OpenDRIVE")
    with pytest.raises(ValueError, match=r"netconvert failed \(exit \d+\): .+"):
        build_network(map_config(tmp_path, file="broken.xodr"))


def test_unreadable_network_is_a_value_error(tmp_path):
    (tmp_path / "bad.net.xml").write_text("not xml at all")
    with pytest.raises(ValueError, match=r"bad\.net\.xml: not a readable SUMO network"):
        read_network(tmp_path / "bad.net.xml")


def test_a_carla_town_cannot_be_built_for_sumo():
    config = parse_scenario(
        {
            "backend": "carla",
            "map": {"town": "Town01"},
            "routes": {"random_length_m": 50},
        }
    ).map
    with pytest.raises(ValueError, match="CARLA town"):
        build_network(config)


def test_opendrive_file_is_compiled_with_netconvert(tmp_path):
    import subprocess

    import sumolib

    generated = build_network(map_config(generate=GRID))
    xodr = tmp_path / "town.xodr"
    subprocess.run(
        [
            sumolib.checkBinary("netconvert"),
            f"--sumo-net-file={generated}",
            f"--opendrive-output={xodr}",
        ],
        check=True,
        capture_output=True,
    )
    compiled = build_network(map_config(tmp_path, file="town.xodr"))
    assert compiled.name == "network.net.xml" and compiled != generated
    net = read_network(compiled)
    assert any(
        lane.allows("passenger") for edge in net.getEdges() for lane in edge.getLanes()
    )
    assert build_network(map_config(tmp_path, file="town.xodr")) == compiled


def test_junction_radius_widens_the_corners():
    def internal_length_m(**extra) -> float:
        net = read_network(build_network(map_config(generate={**GRID, **extra})))
        return sum(lane.getLength() for edge in net.getEdges(withInternal=True) if edge.getFunction() == "internal"
                   for lane in edge.getLanes())

    assert internal_length_m(junction_radius_m=10) > 1.2 * internal_length_m()
