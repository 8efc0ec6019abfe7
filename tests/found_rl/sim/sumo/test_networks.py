"""The SUMO backend on networks of every kind users bring (networks.py): it resets, steps, and
its stop lines show what SUMO signals, so the BEV, expert, infractions and red-light rule work.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import networks

from found_rl.env import DrivingEnv
from found_rl.evaluation.agents import make_agent
from found_rl.events import EpisodeStatus, InfractionKind
from found_rl.maps import read_network
from found_rl.scenario import parse_scenario
from found_rl.sim.sumo.lights import state_codes
from found_rl.world import LightState

STEPS = 450


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("networks")
    return {name: networks.build(name, folder) for name in networks.BUILDERS}


def scenario_on(net_path: Path):
    return parse_scenario({
        "map": {"file": str(net_path)},
        "routes": {"random_length_m": 100},
        "traffic": {"vehicles": [3, 5], "walkers": 0, "warmup_s": 5},
        "episode": {"max_steps": STEPS},
    })  # fmt: skip


def signalled_states(net, lane_id: str, tls_id: str) -> set[int]:
    """States SUMO shows now on the links of ``lane_id`` at light ``tls_id``."""
    import libsumo

    state = libsumo.trafficlight.getRedYellowGreenState(tls_id)
    links = [link for in_lane, _, link in net.getTLS(tls_id).getConnections() if in_lane.getID() == lane_id]
    return {int(state_codes([state], max(links) + 1)[0, link]) for link in links}


def test_netconvert_wrote_the_cases_the_networks_stand_for(built):
    rail = read_network(built["rail"])
    assert {n.getType() for n in rail.getNodes()} >= {"rail_crossing", "rail_signal"}
    types = {n.getType() for n in read_network(built["junction_types"]).getNodes()}
    assert types >= {
        "right_before_left", "left_before_right", "traffic_light_right_on_red", "traffic_light_unregulated",
        "allway_stop", "priority_stop", "unregulated", "zipper", "priority", "dead_end",
    }  # fmt: skip
    for name, program_type in (("actuated", "actuated"), ("delay_based", "delay_based"), ("osm", "actuated")):
        text = built[name].read_text()
        assert f'type="{program_type}"' in text and "<tlLogic" in text, name
    assert "<tlLogic" in built["guessed"].read_text()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(networks.BUILDERS))
def test_the_expert_drives_and_stop_lines_show_what_sumo_signals(built, name):
    env = DrivingEnv(scenario_on(built[name]))
    net = read_network(built[name])
    expert = make_agent("expert")
    summaries = []
    try:
        for seed in range(2):
            obs, _ = env.reset(seed=seed)
            expert.reset()
            for _ in range(STEPS):
                snapshot = env.unwrapped.snapshot
                lights = snapshot.traffic_lights
                for light_id, lane_id, state in zip(lights.ids, lights.lane_ids, lights.states):
                    assert int(state) in signalled_states(net, lane_id, light_id), (light_id, lane_id)
                obs, _, terminated, truncated, info = env.step(expert.act(obs, snapshot))
                assert np.isfinite(obs["state"]).all() if "state" in obs else obs["bev"].any()
                if terminated or truncated:
                    summaries.append(info["episode"])
                    break
    finally:
        env.close()
    assert summaries, "no episode ended"
    kinds = {infraction.kind for summary in summaries for infraction in summary.infractions}
    assert InfractionKind.RED_LIGHT not in kinds and InfractionKind.OUTSIDE_ROUTE_LANES not in kinds
    assert any(s.status == EpisodeStatus.COMPLETED for s in summaries), summaries


def test_a_light_follows_the_program_sumo_runs_and_lights_without_road_links_have_no_stop_line(built):
    from found_rl.sim.backend import make_backend

    backend = make_backend(scenario_on(built["two_programs"]))
    try:
        import libsumo

        snapshot = backend.reset(seed=0)
        assert libsumo.trafficlight.getProgram("A1") == "evening"
        assert "nowhere" not in snapshot.traffic_lights.ids
        seen = set()
        for _ in range(470):  # one 46 s cycle of "evening": green and red both show
            lights = backend.step(backend_controls()).traffic_lights
            seen |= {int(s) for i, s in zip(lights.ids, lights.states) if i == "A1"}
        assert {int(LightState.GREEN), int(LightState.RED)} <= seen
    finally:
        backend.close()
    backend = make_backend(scenario_on(built["rail"]))
    try:
        lights = backend.reset(seed=0).traffic_lights
        assert set(lights.ids) == {"C"}  # the rail signal RS signals trains only
        assert (lights.states == int(LightState.GREEN)).all() and np.isinf(lights.remaining_s).all()
    finally:
        backend.close()


def backend_controls():
    from found_rl.actions import Controls

    return Controls(0.0, 0.0, 1.0)
