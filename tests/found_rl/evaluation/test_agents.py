"""Agents on the scripted straight-road world (no SUMO): expert and a saved checkpoint."""

import json

import gymnasium
import numpy as np
import pytest
import torch

from found_rl.algos.sac import SAC, SacConfig
from found_rl.checkpoint import save_checkpoint
from found_rl.env import DrivingEnv
from found_rl.evaluation import ResultsFile, evaluate, make_agent
from found_rl.models.encoders import EncoderConfig, NetworkConfig
from found_rl.models.observation import ObsSpec
from found_rl.scenario import parse_scenario
from found_rl.state_vector import ROACH_STATE_SIZE, STATE_SIZE
from tests.scenes import ScriptedBackend

SCENARIO = parse_scenario(
    {"map": {"generate": {"type": "grid"}}, "routes": {"random_length_m": 100}, "episode": {"max_steps": 300}}
)
TINY = NetworkConfig(
    encoder=EncoderConfig(
        conv_channels=(4, 4, 4, 4), bottleneck_channels=2, state_hidden=(8, 8), features_dim=16
    ),
    actor_hidden=(16,),
    critic_hidden=(16,),
)


def scripted_env(observation: str = "state") -> DrivingEnv:
    return DrivingEnv(
        SCENARIO, backend=ScriptedBackend(num_routes=2, oncoming_cars=2), observation=observation
    )


def test_expert_completes_the_scripted_routes(tmp_path):
    results = ResultsFile(tmp_path / "r.json", {"agent": "expert"}, total=2)
    totals = evaluate(scripted_env(), make_agent("expert"), results, 2, 1, seed=0, show_progress=False)
    assert totals.driving_score == pytest.approx(1.0)
    assert [r["status"] for r in results.records] == ["Completed", "Completed"]


def test_checkpoint_agent_drives_from_the_observation(tmp_path):
    env = scripted_env(observation="bev")
    torch.manual_seed(0)
    spec = ObsSpec(bev_shape=env.observation_space["bev"].shape, state_dim=STATE_SIZE)
    sac = SAC(spec, 2, SacConfig(network=TINY))
    path = save_checkpoint(tmp_path / "policy.pt", sac.policy_spec, sac.actor.state_dict())
    agent = make_agent(f"checkpoint:{path}")
    obs, _ = env.reset(seed=0, options={"route_index": 0})
    expected = sac.act({k: v[None] for k, v in obs.items()}, deterministic=True)[0]
    np.testing.assert_allclose(agent.act(obs, env.snapshot), expected, atol=1e-5)

    results = ResultsFile(tmp_path / "r.json", {"agent": "checkpoint"}, total=1)
    evaluate(env, agent, results, 1, 1, seed=0, show_progress=False)
    record = json.loads((tmp_path / "r.json").read_text())["_checkpoint"]["records"][0]
    assert record["route_id"] == "RouteScenario_" + env.snapshot.route.route_id + "_rep0"


@pytest.mark.parametrize(("spec", "observation"), [("expert", "state"), ("still", "state"), ("throttle", "state")])
def test_agents_that_read_no_bev_say_so(spec, observation):
    """An evaluation renders no BEV for them (a BEV is most of an evaluation step's time)."""
    assert make_agent(spec).observation == observation


def test_a_checkpoint_agent_reads_the_bev(tmp_path):
    spec = ObsSpec(bev_shape=scripted_env("bev").observation_space["bev"].shape, state_dim=STATE_SIZE)
    sac = SAC(spec, 2, SacConfig(network=TINY))
    path = save_checkpoint(tmp_path / "policy.pt", sac.policy_spec, sac.actor.state_dict())
    assert make_agent(f"checkpoint:{path}").observation == "bev"


def test_checkpoint_for_another_bev_size_is_refused_before_driving(tmp_path):
    env = scripted_env(observation="bev")
    channels, height, width = env.observation_space["bev"].shape
    other = ObsSpec(bev_shape=(channels, height // 2, width // 2), state_dim=STATE_SIZE)
    sac = SAC(other, 2, SacConfig(network=TINY))
    path = save_checkpoint(tmp_path / "small.pt", sac.policy_spec, sac.actor.state_dict())
    agent = make_agent(f"checkpoint:{path}")
    with pytest.raises(ValueError, match=r"--agent checkpoint:.*small\.pt: the policy was built for bev"):
        agent.check_observation_space(env.observation_space)
    matching = gymnasium.spaces.Dict(
        bev=gymnasium.spaces.Box(0, 255, other.bev_shape, np.uint8), state=env.observation_space["state"]
    )
    agent.check_observation_space(matching)  # the policy's own shape passes


def test_a_policy_of_the_ten_number_state_is_told_to_retrain(tmp_path):
    env = scripted_env(observation="bev")
    old = ObsSpec(bev_shape=env.observation_space["bev"].shape, state_dim=ROACH_STATE_SIZE)
    sac = SAC(old, 2, SacConfig(network=TINY))
    agent = make_agent(f"checkpoint:{save_checkpoint(tmp_path / 'old.pt', sac.policy_spec, sac.actor.state_dict())}")
    with pytest.raises(ValueError, match=r"state \(10,\).*state \(18,\); .*before the route points .*retrain it"):
        agent.check_observation_space(env.observation_space)


@pytest.mark.parametrize("device", ["nodevice", "cuda:99"])
def test_unusable_device_is_named_before_the_checkpoint_loads(tmp_path, device):
    path = tmp_path / "policy.pt"
    path.write_bytes(b"not even read")
    with pytest.raises(ValueError, match=f"--device {device}: torch cannot use this device here"):
        make_agent(f"checkpoint:{path}", device=device)
