"""Traffic-light timing tables from SUMO phase programs."""

import numpy as np

from found_rl.sim.sumo.lights import link_state_tables, state_codes, stop_line_segment
from found_rl.world import LightState

RED, YELLOW, GREEN = int(LightState.RED), int(LightState.YELLOW), int(LightState.GREEN)
NONE = int(LightState.NONE)


def test_a_state_spanning_several_phases_counts_them_all():
    # Link 0: green for 30 + 6 s (the second phase only changes link 1), yellow 3 s, red 20 s.
    states = ["GG", "Gy", "yr", "rr"]
    durations = [30.0, 6.0, 3.0, 20.0]
    codes, after, run = link_state_tables(states, durations)
    assert codes[:, 0].tolist() == [GREEN, GREEN, YELLOW, RED]
    assert codes[:, 1].tolist() == [GREEN, YELLOW, RED, RED]
    assert after[0, 0] == 6.0 and after[1, 0] == 0.0
    assert run[0, 0] == run[1, 0] == 36.0
    assert run[2, 1] == run[3, 1] == 23.0 and after[2, 1] == 20.0
    # The run of red wraps around the cycle end for link 1 (phases 2, 3).
    assert run[3, 0] == 20.0


def test_a_light_that_never_changes_has_infinite_times():
    codes, after, run = link_state_tables(["Gr", "Gr"], [10.0, 5.0])
    assert np.isinf(after[:, 0]).all() and np.isinf(run[:, 0]).all()
    assert codes[0, 1] == RED


def test_states_of_differing_length_and_links_past_their_end_are_unsignalled():
    codes = state_codes(["Gr", "GrG"], num_links=4)
    assert codes.tolist() == [[GREEN, RED, NONE, NONE], [GREEN, RED, GREEN, NONE]]
    codes, after, run = link_state_tables(["Gr", "rGy"], [10.0, 5.0], num_links=3)
    assert codes.shape == after.shape == run.shape == (2, 3)
    assert run[0, 0] == 10.0 and after[1, 2] == 0.0 and run[1, 2] == 5.0


def test_a_program_without_phases_gives_empty_tables():
    """A rail signal's program has no phases (it follows trains): this crashed on ``codes.shape``."""
    codes, after, run = link_state_tables([], [], num_links=1)
    assert codes.shape == after.shape == run.shape == (0, 1)


def test_stop_line_spans_the_lane_end_perpendicular():
    segment = stop_line_segment(np.array([[0.0, 0.0], [0.0, 10.0]]), width_m=3.0)
    np.testing.assert_allclose(segment, [[-1.5, 10.0], [1.5, 10.0]])


def test_all_way_stop_junctions_give_red_stop_lines(tmp_path):
    import subprocess

    import sumolib

    from found_rl.maps import read_network
    from found_rl.sim.sumo.lights import stop_sign_lines
    from found_rl.world.frames import SumoFrame

    net_path = tmp_path / "stops.net.xml"
    subprocess.run(
        [
            sumolib.checkBinary("netgenerate"),
            "--grid",
            "--grid.number=2",
            "--grid.length=60",
            "--grid.attach-length=30",
            "--default.junctions.type=allway_stop",
            f"--output-file={net_path}",
        ],
        check=True,
        capture_output=True,
    )
    net = read_network(net_path)
    frame = SumoFrame(tuple(net.getLocationOffset()))
    signs = stop_sign_lines(net, frame)
    stop_nodes = {n.getID() for n in net.getNodes() if n.getType() == "allway_stop"}
    assert len(signs) > 0 and set(signs.ids) <= stop_nodes
    assert (signs.states == RED).all() and np.isinf(signs.remaining_s).all()
    for lane_id, segment in zip(signs.lane_ids, signs.segments, strict=True):
        lane_end = np.asarray(net.getLane(lane_id).getShape()[-1])
        np.testing.assert_allclose(
            frame.to_sumo_xy(segment.mean(axis=0)), lane_end, atol=1e-6
        )
