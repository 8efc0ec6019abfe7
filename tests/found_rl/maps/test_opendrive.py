"""OpenDRIVE import: CARLA-style traffic lights become SUMO programs, sidewalks and crossings stay."""

from pathlib import Path

import pytest

from found_rl.maps import build_network, read_network
from found_rl.maps.opendrive import ImportReport, netconvert_args, read_signal_plan
from found_rl.maps.sample_opendrive import crossroads_xodr
from found_rl.scenario import parse_scenario


def programs(net_path: Path):
    import sumolib

    return sumolib.net.readNet(str(net_path), withPrograms=True, withPedestrianConnections=True)


def compile_town(tmp_path: Path, name: str = "town.xodr", options: list[str] | None = None, **layout) -> Path:
    (tmp_path / name).write_text(crossroads_xodr(**layout))
    config = parse_scenario(
        {"map": {"file": name, "netconvert_options": options or []}, "routes": {"random_length_m": 50}},
        base_dir=tmp_path,
    ).map
    return build_network(config)


@pytest.mark.parametrize("on_arms", [False, True], ids=["heads-on-connecting-roads", "carla-signal-references"])
def test_signalised_junction_gets_a_program_giving_each_approach_green_in_turn(tmp_path, on_arms):
    net_path = compile_town(tmp_path, on_arms=on_arms)
    (light,) = programs(net_path).getTrafficLights()
    assert light.getID() == "100"
    program = next(iter(light.getPrograms().values()))
    vehicle_links = {index for lane, _, index in light.getConnections() if not lane.getID().startswith(":")}
    incoming_by_link = {index: lane.getEdge().getID() for lane, _, index in light.getConnections()}
    greens = [
        {incoming_by_link[i] for i, c in enumerate(p.state) if c in "Gg" and i in vehicle_links}
        for p in program.getPhases()
    ]
    # Every approach gets green, one approach at a time (CARLA cycles a junction's lights).
    assert {edge for phase in greens for edge in phase} == {"1", "2", "3", "4"}
    assert all(len(phase) <= 1 for phase in greens)
    green_s = sum(p.duration for p, g in zip(program.getPhases(), greens, strict=True) if g)
    assert green_s == pytest.approx(4 * 10)  # CARLA's 10 s green per approach
    report = ImportReport.load(net_path)
    assert report.traffic_lights == ("100",) and report.unmapped == ()


def test_sidewalks_and_crossings_are_kept(tmp_path):
    net = read_network(compile_town(tmp_path))
    sidewalks = [
        lane for edge in net.getEdges() if edge.getFunction() == "" for lane in edge.getLanes()
        if lane.allows("pedestrian") and not lane.allows("passenger")
    ]
    assert len(sidewalks) == 8  # both sides of four arms
    assert sum(edge.getFunction() == "crossing" for edge in net.getEdges()) == 4
    report = ImportReport.load(compile_town(tmp_path))
    assert (report.sidewalk_lanes, report.crossings) == (8, 4)


def test_a_map_without_sidewalks_reports_none(tmp_path):
    report = ImportReport.load(compile_town(tmp_path, sidewalks=False))
    assert (report.sidewalk_lanes, report.crossings) == (0, 0)


def test_a_map_without_lights_has_no_programs(tmp_path):
    net_path = compile_town(tmp_path, lights=False)
    assert read_network(net_path).getTrafficLights() == []
    assert ImportReport.load(net_path).traffic_lights == ()


def test_a_light_governing_no_junction_is_named_and_the_map_loads_without_it(tmp_path):
    net_path = compile_town(tmp_path, stray_signal=True)
    report = ImportReport.load(net_path)
    assert report.unmapped == ("traffic light 900 on road 9: the road reaches no junction",)
    # netconvert's own import would signalise road 9's dead end; only the crossroads is.
    assert [tls.getID() for tls in read_network(net_path).getTrafficLights()] == ["100"]


def test_the_user_s_netconvert_options_replace_the_defaults(tmp_path):
    plan = read_signal_plan(_write(tmp_path, crossroads_xodr()))
    args = netconvert_args(plan, ("--tls.green.time=20",))
    assert args.count("--tls.green.time=20") == 1 and "--tls.green.time=10" not in args
    net = programs(compile_town(tmp_path, options=["--tls.green.time=20"]))
    program = next(iter(net.getTrafficLights()[0].getPrograms().values()))
    assert max(p.duration for p in program.getPhases()) > 10


def test_a_file_netconvert_cannot_read_names_the_file(tmp_path):
    (tmp_path / "broken.xodr").write_text("<OpenDRIVE><road id='1'></OpenDRIVE>")
    config = parse_scenario({"map": {"file": "broken.xodr"}, "routes": {"random_length_m": 50}}, base_dir=tmp_path).map
    with pytest.raises(ValueError, match=r"broken\.xodr"):
        build_network(config)
    (tmp_path / "empty.xodr").write_text("<OpenDRIVE><header/></OpenDRIVE>")
    config = parse_scenario({"map": {"file": "empty.xodr"}, "routes": {"random_length_m": 50}}, base_dir=tmp_path).map
    with pytest.raises(ValueError, match=r"netconvert failed \(exit \d+\): .*empty\.xodr: "):
        build_network(config)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.xodr"
    path.write_text(text)
    return path


def test_a_junction_listing_a_controller_is_signalised_even_without_light_heads(tmp_path):
    text = crossroads_xodr(lights=False).replace(
        '<junction id="100" name="crossroads">', '<junction id="100" name="crossroads"><controller id="7" type="0"/>'
    )
    assert read_signal_plan(_write(tmp_path, text)).junctions == ("100",)
    assert read_signal_plan(_write(tmp_path, crossroads_xodr(lights=False))).junctions == ()


def test_a_light_head_on_an_arm_governs_the_arm_s_junction_whatever_its_validity(tmp_path):
    # CARLA's layout: the head stands on the arm (0..0 validity), connecting roads reference it.
    plan = read_signal_plan(_write(tmp_path, crossroads_xodr(on_arms=True, controllers=False)))
    assert plan == read_signal_plan(_write(tmp_path, crossroads_xodr(on_arms=True)))
    assert plan.junctions == ("100",) and plan.unmapped == ()
